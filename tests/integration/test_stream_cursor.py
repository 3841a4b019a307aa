"""The one cursor against a real Redis: a cursor older than what is kept, or past
the run's end, is an error naming the bound, never a silent jump; ``messages_after``
(the resume MCP task streams share) hands out the rest once, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from spindle.gateway.streams.cursor import CursorBeyondEnd, CursorExpired
from spindle.gateway.streams.follower import StreamCursor, StreamFollower
from spindle.gateway.streams.resume import messages_after
from spindle.gateway.streams.run_messages import RunMessages
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.platform.redis_connect import RedisClient

pytestmark = pytest.mark.integration

T = AgentMessageType
KEPT = 10


def update(text: str) -> CompactMessage:
    return CompactMessage(t=T.UPDATE, m=text)


@pytest.fixture
async def small(redis_factory: Callable[[], RedisClient]) -> AsyncIterator[MessageBus]:
    """A bus that keeps the newest 10 messages of a stream (no archive)."""
    bus = MessageBus(redis_factory(), max_messages=KEPT)
    yield bus
    await bus.close()


async def test_a_cursor_older_than_what_is_kept_names_the_oldest_seq(
    hub: SubscriptionHub, small: MessageBus, stream_id: str
) -> None:
    await small.post_many(stream_id, [(update(f"m{i}"), None) for i in range(1, 26)])
    source = RunMessages.of(stream_id, bus=small, archive=None)  # seqs 16..25 kept
    with pytest.raises(CursorExpired) as expired:
        async with StreamFollower(source, hub=hub, cursor=StreamCursor(after_seq=3)):
            pass
    assert expired.value.oldest_seq == 16
    assert expired.value.data() == {"reason": "CURSOR_EXPIRED", "cursor": 3, "oldestSeq": 16}
    assert expired.value.status == 410 and "seq 16" in expired.value.detail

    # The cursor right before the oldest kept seq still resumes whole.
    async with StreamFollower(source, hub=hub, cursor=StreamCursor(after_seq=15)) as follower:
        end = await small.post(stream_id, CompactMessage(t=T.COMPLETE))
        async with asyncio.timeout(10):
            got = [m.seq async for m in follower.messages()]
    assert got == list(range(16, end.seq + 1))


async def test_a_cursor_beyond_the_end_names_the_last_seq(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(1, 6)])
    with pytest.raises(CursorBeyondEnd) as beyond:
        async for _ in messages_after(stream_id, 9, bus=bus, hub=hub, archive=None):
            pass
    assert beyond.value.last_seq == 5 and beyond.value.status == 400
    assert beyond.value.errors[0]["rule"] == "CURSOR_BEYOND_END"


async def test_messages_after_resumes_live_then_stops_at_the_end(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(1, 6)])
    got: list[int] = []

    async def read() -> None:
        async for message in messages_after(stream_id, 2, bus=bus, hub=hub, archive=None):
            got.append(message.seq)
            if message.seq == 5:
                await bus.post(stream_id, update("live"))
                await bus.post(stream_id, CompactMessage(t=T.COMPLETE))

    async with asyncio.timeout(10):
        await read()
    assert got == [3, 4, 5, 6, 7]
    # At the very end: nothing after the cursor, and not an error.
    assert [m.seq async for m in messages_after(stream_id, 7, bus=bus, hub=hub, archive=None)] == []
