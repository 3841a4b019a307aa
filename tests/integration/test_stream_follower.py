"""The stream follower against a real Redis (and the Mongo archive for a cold resume):
subscribe first, backlog after the cursor, live, each seq once, stop at the end.
The same follower serves a run's message list (SSE, A2A) and a task tree's
event stream (JSON-RPC), so both kinds of source are followed here."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence

import orjson
import pytest

from spindle.gateway.protocols.jsonrpc.task_event_stream import TaskEvents, task_event_frames
from spindle.gateway.streams.follower import StreamCursor, StreamFollower
from spindle.gateway.streams.run_messages import RunMessages
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus, StoredMessage
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.store.archive import RunArchive
from spindle.shared.tasks.events import TaskEventLog, status_event

pytestmark = pytest.mark.integration

T = AgentMessageType
WAIT = 10.0


def update(text: str) -> CompactMessage:
    return CompactMessage(t=T.UPDATE, m=text)


def texts(raws: Sequence[bytes]) -> list[str | None]:
    return [orjson.loads(raw).get("m") for raw in raws]


async def collect(follower: StreamFollower) -> list[tuple[int, bytes]]:
    """Everything the follower hands out until it stops on its own."""
    async with asyncio.timeout(WAIT):
        return [(m.seq, m.raw) for m in [x async for x in follower.messages()]]


class PostsWhileReading(RunMessages):
    """A run's messages whose first backlog read is preceded by a post: the
    message lands after the subscription and before the read, so it is both in
    the backlog and on the live feed."""

    def __init__(self, stream_id: str, bus: MessageBus, message: CompactMessage) -> None:
        other = RunMessages.of(stream_id, bus=bus, archive=None)
        super().__init__(stream_id, bus=bus, read_backlog=other.read)
        self._bus = bus
        self._message: CompactMessage | None = message

    async def read(self, after_seq: int, since_ts: int | None) -> list[StoredMessage]:
        message, self._message = self._message, None
        if message is not None:
            await self._bus.post(self.stream_id, message)
        return await super().read(after_seq, since_ts)


async def test_a_message_posted_between_subscribe_and_backlog_arrives_once(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    await bus.post(stream_id, update("before"))
    source = PostsWhileReading(stream_id, bus, update("in between"))
    async with StreamFollower(source, hub=hub) as follower:
        await bus.post(stream_id, CompactMessage(t=T.COMPLETE))
        got = await collect(follower)

    assert [seq for seq, _ in got] == [1, 2, 3]
    assert texts([raw for _, raw in got]) == ["before", "in between", None]
    assert follower.ended


async def test_reconnect_from_a_cursor_delivers_the_rest_once_in_order(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    posted = await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(1, 9)])
    source = RunMessages.of(stream_id, bus=bus, archive=None)
    async with StreamFollower(source, hub=hub, cursor=StreamCursor(after_seq=5)) as follower:
        assert follower.backlog_pending
        reader = asyncio.create_task(collect(follower))
        live = await bus.post_many(stream_id, [(update("m9"), None), (update("m10"), None)])
        end = await bus.post(stream_id, CompactMessage(t=T.COMPLETE))
        got = await reader

    expected = [(p.seq, p.raw) for p in [*posted[5:], *live, end]]
    assert got == expected
    assert [seq for seq, _ in got] == list(range(6, 12))


async def test_the_end_of_the_run_stops_the_follower(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    source = RunMessages.of(stream_id, bus=bus, archive=None)
    async with StreamFollower(source, hub=hub) as follower:
        reader = asyncio.create_task(collect(follower))
        await bus.post(stream_id, update("working"))
        # Another workstream's COMPLETE does not end the conversation; main's does.
        await bus.post(stream_id, CompactMessage(t=T.COMPLETE, w="ws-1"))
        await bus.post(stream_id, CompactMessage(t=T.COMPLETE))
        got = await reader
    assert [seq for seq, _ in got] == [1, 2, 3]

    # A follower that starts after the end hands out up to it and stops at once.
    async with StreamFollower(source, hub=hub, cursor=StreamCursor(after_seq=1)) as late:
        assert [seq for seq, _ in await collect(late)] == [2, 3]
    async with StreamFollower(source, hub=hub, cursor=StreamCursor(live_only=True)) as idle:
        assert idle.ended and not idle.backlog_pending
        assert await collect(idle) == []


async def test_cold_resume_reads_what_redis_trimmed_from_the_archive(
    hub: SubscriptionHub,
    redis_factory: Callable[[], RedisClient],
    archive: RunArchive,
    stream_id: str,
) -> None:
    small = MessageBus(redis_factory(), max_messages=4)
    try:
        posted = [await small.post(stream_id, update(f"m{i}")) for i in range(1, 12)]
        posted.append(await small.post(stream_id, CompactMessage(t=T.COMPLETE)))
        await archive.save_messages(stream_id, [StoredMessage(p.seq, p.ts, p.raw) for p in posted])
        assert len(await small.history(stream_id)) == 4  # Redis keeps only the newest

        source = RunMessages.of(stream_id, bus=small, archive=archive)
        cursor = StreamCursor(after_seq=2)
        async with StreamFollower(source, hub=hub, cursor=cursor) as follower:
            got = await collect(follower)
    finally:
        await small.close()

    assert got == [(p.seq, p.raw) for p in posted[2:]]
    assert follower.ended


async def test_since_hands_out_only_newer_messages(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    posted = await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(1, 6)])
    source = RunMessages.of(stream_id, bus=bus, archive=None)
    cursor = StreamCursor(since_ts=posted[2].ts)
    async with StreamFollower(source, hub=hub, cursor=cursor) as follower:
        reader = asyncio.create_task(collect(follower))
        end = await bus.post(stream_id, CompactMessage(t=T.COMPLETE))
        got = await reader
    assert got == [(p.seq, p.raw) for p in [*posted[3:], end]]


async def test_an_idle_follower_yields_empty_batches_between_messages(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    source = RunMessages.of(stream_id, bus=bus, archive=None)
    async with StreamFollower(source, hub=hub, idle_seconds=0.05) as follower:
        batches = follower.batches()
        assert await anext(batches) == []  # nothing posted yet: a keep-alive
        await bus.post(stream_id, update("hello"))
        batch = await anext(batches)
        while not batch:  # keep-alives may come before the message
            batch = await anext(batches)
        assert [m.seq for m in batch] == [1]
        await batches.aclose()


async def test_an_overflowed_feed_ends_the_follow_or_is_rejoined_from_the_store(
    redis_factory: Callable[[], RedisClient], bus: MessageBus, stream_id: str
) -> None:
    client = redis_factory()
    small_hub = SubscriptionHub(client, queue_size=2)
    await small_hub.start()
    try:
        source = RunMessages.of(stream_id, bus=bus, archive=None)
        ending = StreamFollower(source, hub=small_hub)
        rejoining = StreamFollower(source, hub=small_hub, resubscribe=True)
        async with ending, rejoining:
            # Neither reads while five messages arrive: both queues overflow.
            posted = await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(5)])
            end = await bus.post(stream_id, CompactMessage(t=T.COMPLETE))
            assert await collect(ending) == []  # the SSE client resumes by Last-Event-ID
            assert not ending.ended
            got = await collect(rejoining)
    finally:
        await small_hub.stop()
        await client.aclose()
    assert got == [(p.seq, p.raw) for p in [*posted, end]]


async def test_task_events_follow_the_same_way_and_end_with_the_root(
    hub: SubscriptionHub, redis_client: RedisClient
) -> None:
    root, child = str(uuid.uuid4()), str(uuid.uuid4())
    log = TaskEventLog(redis_client)
    await log.append(
        status_event(task_id=root, root_task_id=root, status="in_progress", progress=0)
    )
    frames = task_event_frames(hub, log, root, keepalive=30)
    first = await anext(frames)  # subscribed, backlog read: the stored event
    for task, status in ((child, "completed"), (root, "completed")):
        await log.append(status_event(task_id=task, root_task_id=root, status=status, progress=1))
    async with asyncio.timeout(WAIT):
        rest = [frame async for frame in frames]

    assert first.startswith(b"id: 1\nevent: task_status_update\n")
    assert [f.split(b"\n", 2)[:2] for f in rest] == [
        [b"id: 2", b"event: task_completed"],
        [b"id: 3", b"event: task_completed"],
    ]
    assert orjson.loads(rest[-1].split(b"data: ", 1)[1])["task_id"] == root

    # From the store alone, a finished tree is handed out and ended at once.
    async with StreamFollower(TaskEvents(log, root), hub=hub) as follower:
        assert follower.ended
        assert [seq for seq, _ in await collect(follower)] == [1, 2, 3]
