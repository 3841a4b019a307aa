"""The bus through Redis Sentinel: a real master, its replica and a sentinel on
loopback ports; the master is killed mid-conversation and the bus goes on
posting to the replica the sentinel promotes, with nothing lost."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from spindle.dev.processes import free_port
from spindle.shared.bus.hub import SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.platform.settings import Settings
from tests.integration.redis_topologies import (
    HOST,
    SentinelSetup,
    have_redis_server,
    start_sentinel,
)
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def sentinel_setup(servers_dir: Path) -> Iterator[SentinelSetup]:
    if not have_redis_server():
        pytest.skip("no redis-server on PATH for Redis Sentinel")
    setup = start_sentinel(servers_dir / "redis-sentinel", free_port(), free_port(), free_port())
    yield setup
    setup.stop()


def update(text: str) -> CompactMessage:
    return CompactMessage(t=AgentMessageType.UPDATE, m=text)


async def test_the_bus_keeps_posting_after_the_master_dies(sentinel_setup: SentinelSetup) -> None:
    setup = sentinel_setup
    bus = MessageBus.from_settings(Settings(redis_url=setup.url))
    hub = SubscriptionHub(bus.redis)
    sentinel = aioredis.Redis(host=HOST, port=setup.sentinel_port)
    stream = f"sentinel-{uuid.uuid4().hex[:8]}"
    await hub.start()
    try:
        async with hub.subscribe(stream) as before_failover:
            posted = await bus.post_many(stream, [(update(f"m{i}"), f"k{i}") for i in range(5)])
            assert [p.seq for p in posted] == [1, 2, 3, 4, 5]
            assert [(await asyncio.wait_for(before_failover.get(), 5)).seq for _ in posted] == [
                1,
                2,
                3,
                4,
                5,
            ]
            # Replication is asynchronous: make sure the replica has it all first.
            assert await bus.redis.wait(1, 5000) == 1

            setup.master.kill()
            # The dead master's pub/sub connection is gone: its subscribers are told
            # to resume from the backlog (by seq) rather than silently starve.
            with pytest.raises(SubscriptionLost):
                await asyncio.wait_for(before_failover.get(), 10)

        async def replica_promoted() -> bool:
            _, port = await sentinel.sentinel_get_master_addr_by_name(setup.service)
            return int(port) == setup.replica_port

        await eventually(replica_promoted, what="the sentinel promotes the replica", timeout=30)

        # The same bus object: its pooled connections to the dead master fail,
        # are retried, and reconnect to whatever master the sentinel names now.
        after = await bus.post(stream, update("after the failover"), dedup_key="after")
        assert (after.seq, after.duplicate, after.closed) == (6, False, False)
        assert [m.seq for m in await bus.history(stream)] == [1, 2, 3, 4, 5, 6]
        retried = await bus.post(stream, update("m0 again"), dedup_key="k0")
        assert (retried.seq, retried.duplicate) == (1, True)  # dedup keys survived too

        async with hub.subscribe(stream) as after_failover:
            live = await bus.post(stream, CompactMessage(t=AgentMessageType.COMPLETE))
            event = await asyncio.wait_for(after_failover.get(), 5)
        assert (event.seq, event.ends) == (live.seq, True) == (7, True)
        assert hub.stats()["reconnects"] >= 1
    finally:
        await hub.stop()
        await bus.close()
        await sentinel.aclose()
