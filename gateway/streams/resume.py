"""Resume a run's messages after a seq, live or from the archive: the call every door shares.

``messages_after`` is what a protocol without a follower of its own calls (MCP
task streams; docs/streaming/gap-free.md#one-cursor-on-every-protocol): it
yields each message after the cursor once, in seq order, from Redis, the
archive and then live, until the message that ends the run, and re-joins a
broken live feed by itself. A cursor that cannot be served whole raises
``CursorExpired`` / ``CursorBeyondEnd`` (``streams.cursor``) before anything
is yielded; each door turns it into its protocol's explicit error.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

from spindle.gateway.streams.follower import Sequenced, StreamCursor, StreamFollower
from spindle.gateway.streams.run_messages import RunMessages
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.store.archive import RunArchive


def follow_after(
    stream_id: str,
    after_seq: int,
    *,
    bus: MessageBus,
    hub: SubscriptionHub,
    archive: RunArchive | None,
    idle_seconds: float | None = None,
) -> StreamFollower:
    """A follower of the run's messages after ``after_seq`` (0: from the first).

    ``open()`` (or ``async with``) checks the cursor and raises
    ``CursorOutOfRange`` when it cannot be served whole.

    Args:
        idle_seconds: hand out an empty batch after this long idle (keep-alives).
    """
    return StreamFollower(
        RunMessages.of(stream_id, bus=bus, archive=archive),
        hub=hub,
        cursor=StreamCursor(after_seq=after_seq),
        idle_seconds=idle_seconds,
        resubscribe=True,
    )


async def messages_after(
    stream_id: str,
    after_seq: int,
    *,
    bus: MessageBus,
    hub: SubscriptionHub,
    archive: RunArchive | None,
) -> AsyncGenerator[Sequenced, None]:
    """Each message with ``seq > after_seq`` once, in order, until the run's end.

    Raises:
        CursorExpired: the messages right after ``after_seq`` are no longer kept.
        CursorBeyondEnd: the run never reached ``after_seq``.
    """
    follower = follow_after(stream_id, after_seq, bus=bus, hub=hub, archive=archive)
    async with follower, contextlib.aclosing(follower.messages()) as messages:
        async for message in messages:
            yield message
