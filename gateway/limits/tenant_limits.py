"""Per-tenant limits of the gateway: rate of run starts and signals, open streams.

The counts live in Redis (``limits.rate_limits``, ``limits.stream_slots``) so
that every gateway process enforces one shared limit per tenant.

When Redis cannot be reached the two kinds of limit fail differently, on purpose:

- Rate limits fail OPEN: the call is let through and a warning is logged
  (once per outage). A run start or a signal goes to Temporal, not to Redis,
  so refusing them would turn a Redis outage into an outage of the whole API,
  while letting them through only costs the rate cap for the outage's length.
- ``open_stream`` fails CLOSED with ``Unavailable`` (503, Retry-After): a stream
  is served from Redis, so it could not work anyway, and an uncounted stream
  would escape the stream cap after Redis comes back.

Every streaming transport takes its slot with ``TenantLimits.open_stream``: the
REST SSE route (its ``RunEventStream`` refreshes and releases the lease), and the
JSON-RPC task streams and A2A message/stream and tasks/resubscribe, whose
responses are wrapped in ``SlotHoldingResponse`` (refreshed while it streams,
released when it ends, also when the client goes away).

A stream's lease lives ``lease_ttl_seconds`` without a refresh (default: three
keep-alive intervals, at least 30 s), so the slots of a gateway that crashed come
back on their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math

from redis.exceptions import RedisError
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from spindle.gateway.limits.rate_limits import RateLimiter
from spindle.gateway.limits.stream_slots import StreamSlots
from spindle.shared.contracts.errors import RateLimited, Unavailable
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.platform.run_start_permits import RUN_START, RunStartPermits
from spindle.shared.platform.settings import Settings

log = logging.getLogger(__name__)

SIGNAL = "signal"
MIN_LEASE_TTL_SECONDS = 30.0
# Keep-alive intervals a lease outlives without a refresh (two may be missed).
LEASE_TTL_KEEPALIVES = 3


def default_lease_ttl(settings: Settings) -> float:
    """Three SSE keep-alive intervals, at least 30 s."""
    return max(MIN_LEASE_TTL_SECONDS, LEASE_TTL_KEEPALIVES * settings.sse_keepalive_seconds)


class StreamLease:
    """One open SSE stream counted against its tenant's ``max_streams_per_tenant``.

    Neither method raises on a Redis failure: the stream is already open, and a
    lease that cannot be refreshed or released expires on its own.
    """

    def __init__(self, slots: StreamSlots, tenant_id: str, lease_id: str) -> None:
        self._slots = slots
        self.tenant_id = tenant_id
        self.lease_id = lease_id
        self.released = False

    async def refresh(self) -> None:
        """Keep the lease alive (called at each keep-alive of the stream)."""
        if self.released:
            return
        try:
            if not await self._slots.refresh(self.tenant_id, self.lease_id):
                log.info(
                    "stream lease %s of tenant %r had expired; re-added",
                    self.lease_id,
                    self.tenant_id,
                )
        except (RedisError, OSError) as exc:
            log.warning("stream lease %s not refreshed: %s", self.lease_id, exc)

    async def release(self) -> None:
        """Give the slot back (idempotent)."""
        if self.released:
            return
        self.released = True
        try:
            await self._slots.release(self.tenant_id, self.lease_id)
        except (RedisError, OSError) as exc:
            log.warning("stream lease %s not released (it will expire): %s", self.lease_id, exc)


class SlotHoldingResponse(Response):
    """Serves ``inner`` while holding a stream slot.

    The lease is refreshed every ``refresh_seconds`` while the response runs and
    released when it ends, however it ends (finished, failed, client gone).

    Args:
        inner: the streaming (or any) response to serve.
        lease: the slot, from ``TenantLimits.open_stream``.
        refresh_seconds: how often to refresh (a third of the lease's lifetime).
    """

    def __init__(self, inner: Response, lease: StreamLease, refresh_seconds: float) -> None:
        # Not Response.__init__: the inner response renders everything itself.
        self.inner = inner
        self.lease = lease
        self.refresh_seconds = refresh_seconds
        self.status_code = inner.status_code
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refresher = asyncio.create_task(self._refresh())
        try:
            await self.inner(scope, receive, send)
        finally:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher
            await self.lease.release()

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.refresh_seconds)
            await self.lease.refresh()


class TenantLimits:
    """The per-tenant limits, kept in Redis so every gateway process shares them.

    Args:
        redis: the gateway's asyncio Redis client (not owned).
        settings: ``rate_limit_run_starts`` and ``rate_limit_signals`` (per minute,
            burst of the same size) and ``max_streams_per_tenant``.
        lease_ttl_seconds: lifetime of a stream lease without a refresh;
            default ``default_lease_ttl(settings)``.
    """

    def __init__(
        self,
        redis: RedisClient,
        settings: Settings,
        *,
        lease_ttl_seconds: float | None = None,
    ) -> None:
        self._redis = redis
        self._settings = settings
        self._rates = RateLimiter(redis)
        self._scheduled = RunStartPermits(redis)
        self.lease_ttl_seconds = (
            default_lease_ttl(settings) if lease_ttl_seconds is None else lease_ttl_seconds
        )
        self._slots = StreamSlots(redis, lease_ttl_seconds=self.lease_ttl_seconds)
        self._failing_open = False

    async def check_run_start(self, tenant_id: str, count: int = 1) -> None:
        """Count ``count`` run starts, all or none.

        Raises:
            RateLimited: 429 with Retry-After when the rate does not allow them all.
        """
        await self._check(
            tenant_id,
            RUN_START,
            self._settings.rate_limit_run_starts,
            "rate_limit_run_starts",
            count=count,
        )

    async def refund_run_start(self, tenant_id: str, count: int = 1) -> None:
        """Give back run starts counted for starts that were refused (never raises)."""
        try:
            await self._rates.refund(
                tenant_id, RUN_START, per_minute=self._settings.rate_limit_run_starts, count=count
            )
        except (RedisError, OSError) as exc:
            log.warning("run-start permit of tenant %r not given back: %s", tenant_id, exc)

    async def prepay_scheduled(self, tenant_id: str, schedule_id: str, count: int) -> None:
        """Leave ``count`` permits taken by ``check_run_start`` for the schedule's next
        runs, which would otherwise take one each on the worker (never raises: a lost
        prepayment counts those runs twice, for one window)."""
        try:
            await self._scheduled.prepay(tenant_id, schedule_id, count)
        except (RedisError, OSError) as exc:
            log.warning("run-start permits of schedule %r not prepaid: %s", schedule_id, exc)

    async def withdraw_scheduled(self, tenant_id: str, schedule_id: str, count: int) -> None:
        """Take back prepaid permits of runs Temporal did not start (never raises)."""
        try:
            await self._scheduled.withdraw(tenant_id, schedule_id, count)
        except (RedisError, OSError) as exc:
            log.warning("prepaid permits of schedule %r not taken back: %s", schedule_id, exc)

    async def check_signal(self, tenant_id: str) -> None:
        """Count one signal. Raises RateLimited (429, Retry-After) when over the rate."""
        await self._check(
            tenant_id, SIGNAL, self._settings.rate_limit_signals, "rate_limit_signals"
        )

    async def open_stream(self, tenant_id: str) -> StreamLease:
        """Take a stream slot. Raises RateLimited when the tenant holds the maximum.

        Raises:
            RateLimited: the tenant holds ``max_streams_per_tenant`` live leases.
            Unavailable: Redis cannot be reached.
        """
        limit = self._settings.max_streams_per_tenant
        lease_id = StreamSlots.new_lease_id()
        try:
            grant = await self._slots.acquire(tenant_id, lease_id, max_leases=limit)
        except (RedisError, OSError) as exc:
            log.warning("stream slot of tenant %r not taken: Redis: %s", tenant_id, exc)
            raise Unavailable(
                "the live message feed (Redis) is unavailable", retry_after=2
            ) from exc
        if not grant.acquired:
            raise RateLimited(
                f"tenant {tenant_id!r} already holds its maximum of {limit} concurrent streams "
                "(max_streams_per_tenant)",
                retry_after=_whole_seconds(grant.retry_after),
            )
        return StreamLease(self._slots, tenant_id, lease_id)

    async def hold_stream(self, tenant_id: str, response: Response) -> SlotHoldingResponse:
        """``response`` served under one of the tenant's stream slots.

        Raises:
            RateLimited, Unavailable: as ``open_stream`` (nothing is served).
        """
        lease = await self.open_stream(tenant_id)
        return self.holding(response, lease)

    def holding(self, response: Response, lease: StreamLease) -> SlotHoldingResponse:
        """``response`` served under ``lease`` (taken earlier with ``open_stream``)."""
        return SlotHoldingResponse(response, lease, self.lease_ttl_seconds / LEASE_TTL_KEEPALIVES)

    async def _check(
        self, tenant_id: str, action: str, per_minute: int, setting: str, *, count: int = 1
    ) -> None:
        try:
            decision = await self._rates.hit(tenant_id, action, per_minute=per_minute, count=count)
        except (RedisError, OSError) as exc:
            if not self._failing_open:
                log.warning("rate limits not enforced while Redis is unreachable: %s", exc)
            self._failing_open = True
            return
        if self._failing_open:
            log.warning("rate limits enforced again: Redis is back")
            self._failing_open = False
        if not decision.allowed:
            asked = f" ({count} asked at once)" if count > 1 else ""
            raise RateLimited(
                f"tenant {tenant_id!r} is over its limit of {per_minute} "
                f"{action.replace('_', ' ')}s per minute ({setting}){asked}",
                retry_after=decision.retry_after_seconds,
            )


def _whole_seconds(seconds: float) -> int:
    return max(1, math.ceil(seconds))
