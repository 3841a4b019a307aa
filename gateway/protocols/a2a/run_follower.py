"""Following one run's messages for the A2A bridge (no gap, no duplicate).

The invariant is ``spindle.gateway.streams.follower.StreamFollower``'s
(docs/streaming/gap-free.md); A2A adds two things: a broken live feed is
re-joined (subscribe again, read the missed messages from the store) rather
than ending the follow, so a follower never misses the message that matters
(REQUEST_INPUT, COMPLETE, TERMINATED); and each message is handed out parsed,
since the A2A events are built from its fields (``sequenced``: with its seq,
the cursor a client resumes from: docs/protocols/a2a.md#resume-by-cursor).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType

from spindle.gateway.streams.follower import StreamFollower
from spindle.shared.contracts.messages import CompactMessage


class RunFollower:
    """Messages of one run, stored first, then live, until the conversation ends.

    Use as an async context manager: entering subscribes (so nothing posted
    afterwards can be missed); iterate ``messages()`` to read.

    Args:
        follower: the run's follower, re-joining a broken live feed
            (``services.run_streams.run_follower``); its cursor says where it
            starts (``live_only``: only messages posted after entering).
    """

    def __init__(self, follower: StreamFollower) -> None:
        self.workflow_id = follower.stream_id
        self._follower = follower

    async def __aenter__(self) -> RunFollower:
        await self._follower.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._follower.close()

    async def messages(self) -> AsyncIterator[CompactMessage]:
        """Stored messages after the cursor, then live ones, until the conversation ends."""
        async for _, message in self.sequenced():
            yield message

    async def sequenced(self) -> AsyncIterator[tuple[int, CompactMessage]]:
        """``messages()`` with each message's seq (the cursor it leaves the client at)."""
        async with contextlib.aclosing(self._follower.messages()) as messages:
            async for item in messages:
                yield item.seq, CompactMessage.model_validate_json(item.raw)
