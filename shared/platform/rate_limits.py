"""Per-tenant rate limits in Redis with GCRA (the generic cell rate algorithm).

A limit of ``N`` per minute with a burst of ``B`` lets a tenant make ``B`` calls
at once, then one every ``60/N`` seconds. GCRA keeps a single number per key,
the *theoretical arrival time* (TAT) of the next call: a call is allowed when
``max(TAT, now) + interval - now <= B * interval`` and then moves the TAT by
one interval; a refused call changes nothing. The whole decision is one Lua
script, so every gateway process shares the same count without races, and the
clock is Redis ``TIME`` (gateway hosts' clocks may disagree). The key expires
when the TAT is in the past, which is exactly when it would mean "unused".

Keys are ``spindle:ratelimit:{<tenant>}:<action>`` (the tenant is the hash
tag, so a tenant's keys share a Redis Cluster slot).

The gateway counts its doors' run starts here (``gateway/limits``), and the worker
counts the runs a schedule starts on its timetable against the same key
(``shared/platform/run_start_permits.py``), so both share one limit per tenant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from spindle.shared.platform.redis_connect import RedisClient

KEY_PREFIX = "spindle:ratelimit"

# KEYS[1] the limit's key; ARGV[1] emission interval (µs); ARGV[2] burst; ARGV[3]
# the calls counted at once (default 1: all of them or none).
# Returns {allowed 0|1, µs until the calls would be allowed, calls left now}.
# Times are µs since the epoch (~1.7e15, exact in a Lua double); numbers are
# written with %.0f because tostring() keeps only 14 significant digits.
GCRA_SCRIPT = """
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or 1)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + cost * interval
local allow_until = now + burst * interval
if new_tat > allow_until then
  return {0, new_tat - allow_until, 0}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat),
           'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
return {1, 0, math.floor((allow_until - new_tat) / interval)}
"""

# KEYS[1] the limit's key; ARGV[1] emission interval (µs); ARGV[2] the calls to give
# back. Moves the TAT back (never before now): the calls are as if never made.
REFUND_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)
local new_tat = tat - tonumber(ARGV[2]) * tonumber(ARGV[1])
if new_tat <= now then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat),
           'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
return 1
"""


def rate_limit_key(tenant_id: str, action: str) -> str:
    """The Redis key of one tenant's limit on one action."""
    return f"{KEY_PREFIX}:{{{tenant_id}}}:{action}"


@dataclass(frozen=True)
class RateDecision:
    """The answer to one call.

    Attributes:
        allowed: the call is within the limit (and was counted).
        retry_after: seconds until the next call would be allowed (0 when allowed).
        remaining: further calls allowed right now after this one.
    """

    allowed: bool
    retry_after: float
    remaining: int

    @property
    def retry_after_seconds(self) -> int:
        """``retry_after`` as whole seconds for a ``Retry-After`` header (at least 1)."""
        return max(1, math.ceil(self.retry_after))


class RateLimiter:
    """Counts calls per tenant and action against ``N per minute, burst B``.

    The limiter does not own its Redis client.

    Args:
        redis: an asyncio Redis client (any ``decode_responses``).
    """

    def __init__(self, redis: RedisClient) -> None:
        self._script = redis.register_script(GCRA_SCRIPT)
        self._refund = redis.register_script(REFUND_SCRIPT)

    async def hit(
        self,
        tenant_id: str,
        action: str,
        *,
        per_minute: int,
        burst: int | None = None,
        count: int = 1,
    ) -> RateDecision:
        """Count ``count`` calls if the limit allows them all (else none).

        Args:
            tenant_id: whose limit.
            action: which limit of the tenant (e.g. ``run_start``).
            per_minute: the sustained rate ``N``.
            burst: calls allowed at once; default ``N``.
            count: calls counted together (a backfill's runs); more than ``burst``
                is never allowed.

        Returns:
            Whether the call is allowed; if not, when to retry. A refused call
            is not counted.

        Raises:
            ValueError: a rate or burst below 1.
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        burst = per_minute if burst is None else burst
        if per_minute < 1 or burst < 1 or count < 1:
            raise ValueError("per_minute, burst and count must be at least 1")
        interval_us = math.ceil(60_000_000 / per_minute)
        reply: Any = await self._script(
            keys=[rate_limit_key(tenant_id, action)], args=[interval_us, burst, count]
        )
        allowed, wait_us, remaining = (int(v) for v in reply)
        return RateDecision(bool(allowed), wait_us / 1_000_000, remaining)

    async def refund(self, tenant_id: str, action: str, *, per_minute: int, count: int = 1) -> None:
        """Give back ``count`` calls counted by ``hit`` that did nothing (a refused start).

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        interval_us = math.ceil(60_000_000 / per_minute)
        await self._refund(keys=[rate_limit_key(tenant_id, action)], args=[interval_us, count])
