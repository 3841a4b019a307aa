"""The Redis message bus against a real Redis: sequence, timestamps, dedup, end of
conversation, trimming, TTL, history filters and concurrency. Every test that
uses Redis runs twice: on a single server and on a three-master Redis Cluster."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable

import orjson
import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from spindle.shared.bus.message_bus import (
    KEY_PARTS,
    Fence,
    MessageBus,
    live_channel,
    stored_ts,
    stream_key,
)
from spindle.shared.contracts.messages import (
    AgentMessageType,
    CompactMessage,
    create_compact_message,
)
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.platform.settings import Settings
from tests.integration.redis_topologies import RedisTopology

pytestmark = [pytest.mark.integration, pytest.mark.redis_topologies]

T = AgentMessageType


def update(text: str, **kwargs: object) -> CompactMessage:
    return CompactMessage(t=T.UPDATE, m=text, **kwargs)  # type: ignore[arg-type]


async def test_post_assigns_consecutive_seq_and_strictly_increasing_ts(
    bus: MessageBus, stream_id: str
) -> None:
    # 100 posts in one pipeline land within a millisecond or two of Redis TIME.
    results = await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(100)])

    assert [r.seq for r in results] == list(range(1, 101))
    timestamps = [r.ts for r in results]
    assert all(b > a for a, b in itertools.pairwise(timestamps))
    assert len({r.ts for r in results}) == 100
    assert not any(r.duplicate or r.closed for r in results)
    assert await bus.last_seq(stream_id) == 100


async def test_an_older_message_ts_is_bumped_past_the_last_one(
    bus: MessageBus, stream_id: str
) -> None:
    first = await bus.post(stream_id, update("now"))
    older = await bus.post(stream_id, update("from the past", ts=first.ts - 60_000))
    same = await bus.post(stream_id, update("same ms", ts=older.ts))
    future = await bus.post(stream_id, update("ahead", ts=first.ts + 10_000))
    after_future = await bus.post(stream_id, update("now again"))

    assert older.ts == first.ts + 1
    assert same.ts == older.ts + 1
    assert future.ts == first.ts + 10_000  # a later own ts is kept
    assert after_future.ts == future.ts + 1
    assert [stored_ts(m.raw) for m in await bus.history(stream_id)] == [
        first.ts,
        older.ts,
        same.ts,
        future.ts,
        after_future.ts,
    ]


async def test_same_dedup_key_twice_stores_once_and_returns_the_original_seq(
    bus: MessageBus, redis_topology: RedisTopology, stream_id: str
) -> None:
    async with redis_topology.listen(live_channel(stream_id)) as pubsub:
        original = await bus.post(stream_id, update("hello"), dedup_key="act-1:0")
        retry = await bus.post(stream_id, update("hello again"), dedup_key="act-1:0")
        other = await bus.post(stream_id, update("next"), dedup_key="act-1:1")

        assert (original.seq, original.duplicate) == (1, False)
        assert (retry.seq, retry.duplicate, retry.closed) == (1, True, False)
        assert (retry.ts, retry.raw) == (original.ts, original.raw)
        assert other.seq == 2
        history = await bus.history(stream_id)
        assert [(m.seq, m.raw) for m in history] == [(1, original.raw), (2, other.raw)]

        # The duplicate published nothing: the next live message after seq 1 is seq 2.
        published: list[bytes] = []
        while len(published) < 2:
            msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5)
            assert msg is not None, "expected two live messages"
            published.append(msg["data"].split(b" ", 1)[0])
        assert published == [b"1", b"2"]


async def test_a_fenced_post_of_a_superseded_attempt_posts_nothing(
    bus: MessageBus, redis_client: RedisClient, stream_id: str
) -> None:
    key = stream_key(stream_id, "fence:wf:run:node.1")
    first = await bus.post(stream_id, update("attempt 1"), fence=Fence(key, 1, 600))
    second = await bus.post(stream_id, update("attempt 2"), fence=Fence(key, 2, 600))
    late = await bus.post(stream_id, update("attempt 1, late"), fence=Fence(key, 1, 600))

    assert (first.seq, first.superseded, second.seq, second.superseded) == (1, 0, 2, 0)
    assert (late.seq, late.superseded, late.raw) == (0, 2, b"")
    assert [orjson.loads(m.raw)["m"] for m in await bus.history(stream_id)] == [
        "attempt 1",
        "attempt 2",
    ]
    # The fence holds the newest attempt, for the TTL the post gave it.
    assert await redis_client.get(key) == b"2"
    assert 0 < await redis_client.ttl(key) <= 600


async def test_post_many_keeps_order_and_dedups_within_the_batch(
    bus: MessageBus, stream_id: str
) -> None:
    results = await bus.post_many(
        stream_id,
        [(update("a"), "k1"), (update("b"), None), (update("a again"), "k1"), (update("c"), "k2")],
    )
    assert [(r.seq, r.duplicate) for r in results] == [
        (1, False),
        (2, False),
        (1, True),
        (3, False),
    ]
    assert [orjson.loads(m.raw)["m"] for m in await bus.history(stream_id)] == ["a", "b", "c"]
    assert await bus.post_many(stream_id, []) == []


async def test_nothing_is_accepted_after_the_conversation_ends(
    bus: MessageBus, stream_id: str
) -> None:
    await bus.post(stream_id, update("working"))
    # COMPLETE of another workstream does not end the conversation.
    child_done = await bus.post(
        stream_id, create_compact_message(T.COMPLETE, "child done", workstream_id="ws-1")
    )
    assert not child_done.closed
    assert await bus.end_seq(stream_id) is None
    more = await bus.post(stream_id, update("still working"))
    assert not more.closed

    final = await bus.post(stream_id, create_compact_message(T.COMPLETE, "done"), dedup_key="end")
    assert await bus.end_seq(stream_id) == final.seq == 4

    refused = await bus.post(stream_id, update("too late"))
    assert (refused.seq, refused.closed, refused.raw) == (0, True, b"")
    refused_many = await bus.post_many(
        stream_id, [(update("late 1"), None), (update("late 2"), "x")]
    )
    assert all(r.closed and r.seq == 0 for r in refused_many)
    # A retried final post is a duplicate, not a refusal.
    retried = await bus.post(stream_id, create_compact_message(T.COMPLETE, "done"), dedup_key="end")
    assert (retried.seq, retried.duplicate, retried.closed) == (final.seq, True, False)

    assert [m.seq for m in await bus.history(stream_id)] == [1, 2, 3, 4]
    assert await bus.last_seq(stream_id) == 4


async def test_terminated_on_main_ends_the_conversation(bus: MessageBus, stream_id: str) -> None:
    result = await bus.post(stream_id, create_compact_message(T.TERMINATED, "stopped"))
    assert await bus.end_seq(stream_id) == result.seq
    assert (await bus.post(stream_id, update("after"))).closed


async def test_ending_message_in_a_batch_refuses_the_rest(bus: MessageBus, stream_id: str) -> None:
    results = await bus.post_many(
        stream_id,
        [(update("a"), None), (CompactMessage(t=T.COMPLETE), None), (update("b"), None)],
    )
    assert [(r.seq, r.closed) for r in results] == [(1, False), (2, False), (0, True)]


async def test_trimming_to_max_messages_keeps_seq_numbering_right(
    redis_factory: Callable[[], RedisClient], stream_id: str
) -> None:
    small = MessageBus(redis_factory(), max_messages=10)
    try:
        posted = [await small.post(stream_id, update(f"m{i}")) for i in range(1, 26)]
        history = await small.history(stream_id)

        assert [m.seq for m in history] == list(range(16, 26))
        by_seq = {p.seq: p for p in posted}
        for message in history:  # seq, ts and bytes line up with what post returned
            assert (message.ts, message.raw) == (by_seq[message.seq].ts, by_seq[message.seq].raw)
            assert orjson.loads(message.raw)["m"] == f"m{message.seq}"
        assert [m.seq for m in await small.history(stream_id, after_seq=20)] == [21, 22, 23, 24, 25]
        assert [m.seq for m in await small.history(stream_id, after_seq=3)] == list(range(16, 26))
        assert await small.history(stream_id, after_seq=25) == []
        assert await small.last_seq(stream_id) == 25
        # A duplicate of a message trimmed away still reports its seq.
        assert (await small.post(stream_id, update("x"), dedup_key="late")).seq == 26
        for i in range(10):
            await small.post(stream_id, update(f"fill {i}"))
        old = await small.post(stream_id, update("x"), dedup_key="late")
        assert (old.seq, old.duplicate, old.ts, old.raw) == (26, True, 0, b"")
    finally:
        await small.close()


async def test_every_key_of_a_stream_gets_the_ttl(
    redis_factory: Callable[[], RedisClient], redis_client: RedisClient, stream_id: str
) -> None:
    short = MessageBus(redis_factory(), ttl_seconds=300)
    try:
        await short.set_meta(stream_id, {"run_id": "r1"})
        await short.post(stream_id, update("a"), dedup_key="k")
        await short.post(stream_id, CompactMessage(t=T.COMPLETE))
        for part in KEY_PARTS:
            ttl = await redis_client.ttl(stream_key(stream_id, part))
            assert 0 < ttl <= 300, f"{part}: ttl {ttl}"
    finally:
        await short.close()


async def test_keys_share_the_stream_hash_tag(
    bus: MessageBus, redis_topology: RedisTopology, stream_id: str
) -> None:
    await bus.set_meta(stream_id, {"tenant_id": "t1"})
    await bus.post(stream_id, update("a"), dedup_key="k")
    await bus.post(stream_id, CompactMessage(t=T.COMPLETE))

    # On a cluster, every key is on the one node that serves the stream's tag.
    async with redis_topology.node(stream_key(stream_id, "log")) as node:
        keys = sorted(k.decode() for k in await node.keys(f"*{stream_id}*"))
    assert keys == sorted(stream_key(stream_id, part) for part in KEY_PARTS)
    assert all(f"{{{stream_id}}}" in key for key in keys)
    assert f"{{{stream_id}}}" in live_channel(stream_id)
    assert len({key_slot(key.encode()) for key in [*keys, live_channel(stream_id)]}) == 1


async def test_stored_bytes_are_the_compact_wire_format_with_ts_first(
    bus: MessageBus, stream_id: str
) -> None:
    messages = [
        create_compact_message(
            T.STREAMING_CHUNK, "partial ✓", workstream_id="ws-2", final=False, activity_id="a1"
        ),
        create_compact_message(
            T.ANSWER, "l'été", details={"n": [1, 2], "q": '"'}, workstream_id="main"
        ),
        CompactMessage(t=T.IDLE),
    ]
    for message in messages:
        result = await bus.post(stream_id, message)
        assert result.raw.startswith(b'{"ts":')
    history = await bus.history(stream_id)
    for sent, stored in zip(messages, history, strict=True):
        assert stored.raw.startswith(b'{"ts":')
        parsed = CompactMessage.model_validate_json(stored.raw)
        assert parsed.ts == stored.ts == stored_ts(stored.raw)
        assert parsed.model_copy(update={"ts": None}) == sent
        assert b"null" not in stored.raw
    assert b'"w"' not in history[1].raw  # main is implicit


async def test_history_since_ts_excludes_equal_and_matches_a_linear_filter(
    bus: MessageBus, stream_id: str
) -> None:
    own = [1000, 2000, 2000, 3000, 3001, 5000]  # the second 2000 becomes 2001
    for ts in own:
        await bus.post(stream_id, update(str(ts), ts=ts))
    stored = await bus.history(stream_id)
    assert [m.ts for m in stored] == [1000, 2000, 2001, 3000, 3001, 5000]

    assert [m.ts for m in await bus.history(stream_id, since_ts=2000)] == [2001, 3000, 3001, 5000]
    assert next(m.ts for m in await bus.history(stream_id, since_ts=1999)) == 2000
    assert [m.ts for m in await bus.history(stream_id, since_ts=5000)] == []
    assert len(await bus.history(stream_id, since_ts=0)) == 6
    assert len(await bus.history(stream_id, since_ts=999)) == 6
    for since in {t + d for t in [m.ts for m in stored] for d in (-1, 0, 1)}:
        expected = [m for m in stored if m.ts > since]
        assert await bus.history(stream_id, since_ts=since) == expected, since


async def test_history_combines_after_seq_since_ts_and_limit(
    bus: MessageBus, stream_id: str
) -> None:
    await bus.post_many(stream_id, [(update(str(i), ts=100 * i), None) for i in range(1, 21)])
    # seq i has ts 100*i
    assert [m.seq for m in await bus.history(stream_id, after_seq=5, limit=3)] == [6, 7, 8]
    assert [m.seq for m in await bus.history(stream_id, since_ts=1250, limit=2)] == [13, 14]
    assert [m.seq for m in await bus.history(stream_id, after_seq=15, since_ts=500)] == [
        16,
        17,
        18,
        19,
        20,
    ]
    assert [m.seq for m in await bus.history(stream_id, after_seq=3, since_ts=1800)] == [19, 20]
    assert await bus.history(stream_id, limit=0) == []
    assert await bus.history("never-posted-" + stream_id) == []


async def test_random_since_queries_agree_with_scanning(bus: MessageBus, stream_id: str) -> None:
    rng = random.Random(7)
    now = 1_700_000_000_000
    stamps = sorted(now + rng.randrange(0, 500) for _ in range(300))
    await bus.post_many(stream_id, [(update("x", ts=ts), None) for ts in stamps])
    stored = await bus.history(stream_id)
    for _ in range(50):
        since = rng.randrange(now - 5, stored[-1].ts + 5)
        after = rng.randrange(0, 310)
        expected = [m for m in stored if m.ts > since and m.seq > after]
        assert await bus.history(stream_id, since_ts=since, after_seq=after) == expected


async def test_200_concurrent_posts_get_seqs_1_to_200(
    redis_topology: RedisTopology, stream_id: str
) -> None:
    # The production client: a bounded pool that makes the 200 tasks queue up.
    concurrent_bus = MessageBus.from_settings(Settings(redis_url=redis_topology.url))
    try:
        results = await asyncio.gather(
            *(concurrent_bus.post(stream_id, update(f"task {i}")) for i in range(200))
        )
        assert sorted(r.seq for r in results) == list(range(1, 201))
        history = await concurrent_bus.history(stream_id)
        assert [m.seq for m in history] == list(range(1, 201))
        timestamps = [m.ts for m in history]
        assert all(b > a for a, b in itertools.pairwise(timestamps))
        assert {orjson.loads(m.raw)["m"] for m in history} == {f"task {i}" for i in range(200)}
    finally:
        await concurrent_bus.close()


async def test_meta_exists_and_delete(bus: MessageBus, stream_id: str) -> None:
    assert not await bus.exists(stream_id)
    assert await bus.get_meta(stream_id) == {}
    await bus.set_meta(stream_id, {"run_id": "r-1", "tenant_id": "acme"})
    assert await bus.exists(stream_id)
    await bus.set_meta(stream_id, {"graph": "demo"})
    assert await bus.get_meta(stream_id) == {"run_id": "r-1", "tenant_id": "acme", "graph": "demo"}

    other = stream_id + "-log-only"
    await bus.post(other, update("a"))
    assert await bus.exists(other)

    await bus.delete_stream(stream_id)
    await bus.delete_stream(other)
    assert not await bus.exists(stream_id)
    assert not await bus.exists(other)
    assert await bus.last_seq(other) == 0
    assert await bus.history(other) == []


async def test_from_settings_talks_to_the_configured_redis(
    redis_topology: RedisTopology, stream_id: str
) -> None:
    settings = Settings(redis_url=redis_topology.url, history_max_messages=10, history_ttl_days=2)
    configured = MessageBus.from_settings(settings)
    try:
        assert await configured.ping()
        assert (configured.max_messages, configured.ttl_seconds) == (10, 2 * 86400)
        for i in range(12):
            await configured.post(stream_id, update(str(i)))
        assert len(await configured.history(stream_id)) == 10
    finally:
        await configured.close()


async def test_ping_is_false_when_redis_is_unreachable() -> None:
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    from spindle.dev.processes import free_port

    dead = MessageBus(
        aioredis.Redis(
            host="127.0.0.1",
            port=free_port(),
            socket_connect_timeout=0.5,
            retry=Retry(NoBackoff(), retries=0),
        )
    )
    try:
        assert await dead.ping() is False
    finally:
        await dead.close()
