"""GCRA rate limits against a real Redis (a server and a Redis Cluster): the burst,
the refill, tenant isolation, refusals that cost nothing, and the gateway's 429 /
fail-open behaviour."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from spindle.dev.processes import free_port
from spindle.gateway.limits.rate_limits import RateLimiter, rate_limit_key
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.shared.contracts.errors import RateLimited
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.platform.settings import Settings
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.redis_topologies]


@pytest.fixture
def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def limiter(redis_client: RedisClient) -> RateLimiter:
    return RateLimiter(redis_client)


async def test_the_burst_is_allowed_then_the_next_call_is_refused(
    limiter: RateLimiter, tenant: str
) -> None:
    decisions = [await limiter.hit(tenant, "run_start", per_minute=5) for _ in range(5)]
    refused = await limiter.hit(tenant, "run_start", per_minute=5)

    assert [d.allowed for d in decisions] == [True] * 5
    assert [d.remaining for d in decisions] == [4, 3, 2, 1, 0]
    assert not refused.allowed
    # One call every 12 s refills the bucket: the wait is at most one interval.
    assert 0 < refused.retry_after <= 12
    assert refused.retry_after_seconds in range(1, 13)


async def test_a_smaller_burst_than_the_rate_is_honoured(limiter: RateLimiter, tenant: str) -> None:
    allowed = [(await limiter.hit(tenant, "x", per_minute=60, burst=2)).allowed for _ in range(3)]

    assert allowed == [True, True, False]


async def test_tenants_and_actions_are_counted_apart(limiter: RateLimiter, tenant: str) -> None:
    other = f"{tenant}-other"
    for _ in range(2):
        assert (await limiter.hit(tenant, "run_start", per_minute=2)).allowed
    assert not (await limiter.hit(tenant, "run_start", per_minute=2)).allowed

    assert (await limiter.hit(other, "run_start", per_minute=2)).allowed
    assert (await limiter.hit(tenant, "signal", per_minute=2)).allowed


async def test_refused_calls_do_not_consume_and_the_bucket_refills(
    limiter: RateLimiter, tenant: str
) -> None:
    # 600/min: one call per 100 ms after a burst of 3.
    for _ in range(3):
        assert (await limiter.hit(tenant, "signal", per_minute=600, burst=3)).allowed
    refusals = [await limiter.hit(tenant, "signal", per_minute=600, burst=3) for _ in range(20)]

    assert not any(r.allowed for r in refusals)
    # Had refusals counted, each would push the next allowed call 100 ms further.
    assert refusals[-1].retry_after <= refusals[0].retry_after <= 0.1

    async def allowed_again() -> bool:
        # Each poll that is refused must cost nothing, or this never succeeds.
        return (await limiter.hit(tenant, "signal", per_minute=600, burst=3)).allowed

    await eventually(allowed_again, what="a call allowed one interval later", timeout=2.0)


async def test_the_key_is_per_tenant_and_action_and_expires(
    limiter: RateLimiter, redis_client: RedisClient, tenant: str
) -> None:
    await limiter.hit(tenant, "run_start", per_minute=60)
    key = rate_limit_key(tenant, "run_start")

    assert key == f"spindle:ratelimit:{{{tenant}}}:run_start"
    # One call at 60/min is "used up" for 1 s; the key lives no longer than that.
    assert 0 < await redis_client.pttl(key) <= 1000


async def test_tenant_limits_raise_429_with_retry_after(
    redis_client: RedisClient, tenant: str
) -> None:
    limits = TenantLimits(redis_client, Settings(rate_limit_run_starts=2, rate_limit_signals=3))

    for _ in range(2):
        await limits.check_run_start(tenant)
    with pytest.raises(RateLimited) as run_start:
        await limits.check_run_start(tenant)
    for _ in range(3):
        await limits.check_signal(tenant)
    with pytest.raises(RateLimited) as signal:
        await limits.check_signal(tenant)

    assert run_start.value.status == 429
    assert isinstance(run_start.value.retry_after, int)
    assert 1 <= run_start.value.retry_after <= 30  # one run start per 30 s
    assert tenant in run_start.value.detail and "rate_limit_run_starts" in run_start.value.detail
    assert 1 <= signal.value.retry_after <= 20
    assert tenant in signal.value.detail and "rate_limit_signals" in signal.value.detail


async def test_two_gateways_share_one_rate(
    redis_factory: Callable[[], RedisClient], tenant: str
) -> None:
    settings = Settings(rate_limit_run_starts=2)
    first, second = redis_factory(), redis_factory()
    try:
        gateway_a, gateway_b = TenantLimits(first, settings), TenantLimits(second, settings)
        await gateway_a.check_run_start(tenant)
        await gateway_b.check_run_start(tenant)
        with pytest.raises(RateLimited):
            await gateway_a.check_run_start(tenant)
    finally:
        await first.aclose()
        await second.aclose()


async def test_rate_limits_fail_open_when_redis_is_unreachable(tenant: str) -> None:
    nowhere = aioredis.Redis(
        port=free_port(), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0)
    )
    try:
        limits = TenantLimits(nowhere, Settings(rate_limit_run_starts=1, rate_limit_signals=1))
        for _ in range(3):  # over the limit of 1, but nothing can count it
            await limits.check_run_start(tenant)
            await limits.check_signal(tenant)
    finally:
        await nowhere.aclose()
