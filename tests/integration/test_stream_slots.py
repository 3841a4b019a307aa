"""Concurrent-stream slots against a real Redis (a server and a Redis Cluster): the
maximum, release, expiry of a dead gateway's leases, two gateways sharing one
count, and the SSE stream holding its lease exactly while it is open."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from spindle.dev.processes import free_port
from spindle.gateway.limits.stream_slots import StreamSlots, stream_slots_key
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import RateLimited, Unavailable
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.platform.settings import Settings
from tests.integration.sse_responses import SCOPE, SseClient, sse_response
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.redis_topologies]


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def slots(redis_client: RedisClient) -> StreamSlots:
    return StreamSlots(redis_client, lease_ttl_seconds=30)


async def test_the_maximum_is_enforced_and_release_frees_a_slot(
    slots: StreamSlots, tenant: str
) -> None:
    leases = [slots.new_lease_id() for _ in range(4)]
    grants = [await slots.acquire(tenant, lease, max_leases=3) for lease in leases]

    assert [g.acquired for g in grants] == [True, True, True, False]
    assert [g.held for g in grants] == [1, 2, 3, 3]
    assert 0 < grants[3].retry_after <= 30
    assert await slots.held(tenant) == 3

    await slots.release(tenant, leases[0])
    await slots.release(tenant, leases[0])  # twice: nothing more happens

    assert await slots.held(tenant) == 2
    assert (await slots.acquire(tenant, leases[3], max_leases=3)).acquired
    assert not (await slots.acquire(tenant, slots.new_lease_id(), max_leases=3)).acquired


async def test_tenants_have_their_own_slots(slots: StreamSlots, tenant: str) -> None:
    assert (await slots.acquire(tenant, "a", max_leases=1)).acquired
    assert not (await slots.acquire(tenant, "b", max_leases=1)).acquired
    assert (await slots.acquire(f"{tenant}-other", "b", max_leases=1)).acquired


async def test_an_expired_lease_is_reclaimed(
    redis_client: RedisClient, redis_factory: Callable[[], RedisClient], tenant: str
) -> None:
    # A "gateway" takes both slots and dies without releasing them.
    dead = redis_factory()
    dead_slots = StreamSlots(dead, lease_ttl_seconds=0.2)
    assert (await dead_slots.acquire(tenant, "dead-1", max_leases=2)).acquired
    assert (await dead_slots.acquire(tenant, "dead-2", max_leases=2)).acquired
    await dead.aclose()

    live = StreamSlots(redis_client, lease_ttl_seconds=30)
    assert not (await live.acquire(tenant, "new", max_leases=2)).acquired

    async def reclaimed() -> bool:
        return (await live.acquire(tenant, "new", max_leases=2)).acquired

    await eventually(reclaimed, what="the dead gateway's leases expire", timeout=5)

    # Its two leases were taken one after the other, so the second may outlive the
    # first by a moment (on a loaded machine, by more than the probe's interval).
    async def only_the_new_one() -> bool:
        return await _live_leases(redis_client, tenant) == [b"new"]

    await eventually(only_the_new_one, what="only the new lease is left", timeout=5)


async def test_refresh_keeps_a_lease_alive_past_its_ttl(
    redis_client: RedisClient, tenant: str
) -> None:
    slots = StreamSlots(redis_client, lease_ttl_seconds=0.6)
    await slots.acquire(tenant, "refreshed", max_leases=5)
    await slots.acquire(tenant, "forgotten", max_leases=5)

    async def only_the_refreshed_one_is_left() -> bool:
        assert await slots.refresh(tenant, "refreshed")
        return await slots.held(tenant) == 1

    await eventually(only_the_refreshed_one_is_left, what="the unrefreshed lease expires")
    assert await _live_leases(redis_client, tenant) == [b"refreshed"]
    # The tenant's key expires with its last lease.
    assert 0 < await redis_client.pttl(stream_slots_key(tenant)) <= 600


async def test_refresh_re_adds_a_lease_that_expired(redis_client: RedisClient, tenant: str) -> None:
    slots = StreamSlots(redis_client, lease_ttl_seconds=0.1)
    await slots.acquire(tenant, "slow", max_leases=1)
    await eventually(lambda: _held_is(slots, tenant, 0), what="the lease expires")

    assert not await slots.refresh(tenant, "slow")  # it had expired ...
    assert await slots.held(tenant) == 1  # ... and counts again: its stream is open


async def _live_leases(redis: RedisClient, tenant: str) -> list[bytes]:
    """Lease ids whose expiry (Redis TIME, ms) is still ahead."""
    seconds, micros = await redis.time()
    now_ms = seconds * 1000 + micros // 1000
    return list(await redis.zrangebyscore(stream_slots_key(tenant), f"({now_ms}", "+inf"))


async def _held_is(slots: StreamSlots, tenant: str, count: int) -> bool:
    return await slots.held(tenant) == count


async def test_two_gateways_share_the_stream_count(
    redis_factory: Callable[[], RedisClient], tenant: str
) -> None:
    settings = Settings(max_streams_per_tenant=2)
    first, second = redis_factory(), redis_factory()
    try:
        gateway_a, gateway_b = TenantLimits(first, settings), TenantLimits(second, settings)
        await gateway_a.open_stream(tenant)
        lease_b = await gateway_b.open_stream(tenant)
        with pytest.raises(RateLimited) as refused:
            await gateway_a.open_stream(tenant)
        other_tenant = await gateway_a.open_stream(f"{tenant}-other")

        assert refused.value.status == 429
        assert isinstance(refused.value.retry_after, int) and refused.value.retry_after >= 1
        assert tenant in refused.value.detail
        assert "max_streams_per_tenant" in refused.value.detail
        assert other_tenant.tenant_id != tenant

        await lease_b.release()
        await lease_b.release()  # idempotent: must not free a second slot
        await gateway_a.open_stream(tenant)
        with pytest.raises(RateLimited):
            await gateway_b.open_stream(tenant)
    finally:
        await first.aclose()
        await second.aclose()


def test_the_default_lease_ttl_is_three_keepalives_and_at_least_30_s(
    redis_client: RedisClient,
) -> None:
    short = TenantLimits(redis_client, Settings(sse_keepalive_seconds=1))
    long = TenantLimits(redis_client, Settings(sse_keepalive_seconds=20))
    tiny = TenantLimits(redis_client, Settings(), lease_ttl_seconds=0.5)

    assert (short.lease_ttl_seconds, long.lease_ttl_seconds) == (30, 60)
    assert tiny.lease_ttl_seconds == 0.5


async def test_open_stream_is_unavailable_when_redis_is_unreachable(tenant: str) -> None:
    nowhere = aioredis.Redis(
        port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    try:
        with pytest.raises(Unavailable) as refused:
            await TenantLimits(nowhere, Settings()).open_stream(tenant)
        assert refused.value.status == 503 and refused.value.retry_after >= 1
    finally:
        await nowhere.aclose()


# --- the SSE stream holds its lease while open ------------------------------------


async def test_the_stream_refreshes_its_lease_and_releases_it_on_disconnect(
    bus: MessageBus,
    hub: SubscriptionHub,
    redis_client: RedisClient,
    stream_id: str,
    tenant: str,
) -> None:
    limits = TenantLimits(redis_client, Settings(max_streams_per_tenant=5), lease_ttl_seconds=0.8)
    slots = StreamSlots(redis_client, lease_ttl_seconds=0.8)
    await bus.post(stream_id, CompactMessage(t=AgentMessageType.UPDATE, m="hello"))
    lease = await limits.open_stream(tenant)
    await slots.acquire(tenant, "no-stream", max_leases=5)  # same TTL, never refreshed
    client = SseClient()
    response = sse_response(stream_id, bus, hub, keepalive=0.1, lease=lease)
    serving = asyncio.create_task(response(SCOPE, client.receive, client.send))
    try:
        await eventually(lambda: b"hello" in client.body, what="the backlog is sent")
        assert await slots.held(tenant) == 2
        # The stream's lease outlives the one nobody refreshes.
        await eventually(lambda: _held_is(slots, tenant, 1), what="the idle lease expires")
        assert await _live_leases(redis_client, tenant) == [lease.lease_id.encode()]
        assert b": keep-alive" in client.body

        client.hang_up.set()
        await asyncio.wait_for(serving, 10)
    finally:
        client.hang_up.set()
        await asyncio.wait_for(asyncio.shield(serving), 10)

    assert client.status == 200
    assert await slots.held(tenant) == 0
    assert lease.released


async def test_the_stream_releases_its_lease_when_the_conversation_ends(
    bus: MessageBus,
    hub: SubscriptionHub,
    redis_client: RedisClient,
    stream_id: str,
    tenant: str,
) -> None:
    limits = TenantLimits(redis_client, Settings(max_streams_per_tenant=1))
    slots = StreamSlots(redis_client, lease_ttl_seconds=30)
    await bus.post(stream_id, CompactMessage(t=AgentMessageType.UPDATE, m="working"))
    lease = await limits.open_stream(tenant)
    client = SseClient()
    response = sse_response(stream_id, bus, hub, keepalive=5, lease=lease)
    serving = asyncio.create_task(response(SCOPE, client.receive, client.send))
    try:
        await eventually(lambda: b"working" in client.body, what="the backlog is sent")
        with pytest.raises(RateLimited):
            await limits.open_stream(tenant)  # the open stream holds the only slot

        await bus.post(stream_id, CompactMessage(t=AgentMessageType.COMPLETE, m="done"))
        await asyncio.wait_for(asyncio.shield(serving), 10)
    finally:
        client.hang_up.set()
        await asyncio.wait_for(asyncio.shield(serving), 10)

    assert client.finished and b"done" in client.body
    assert await slots.held(tenant) == 0
    await limits.open_stream(tenant)  # the slot is free again
