"""Concurrent-stream slots per tenant, shared by every gateway process via Redis.

Each open stream holds a *lease*: a member of the ZSET ``spindle:streams:{<tenant>}``
scored by its expiry (epoch ms of Redis ``TIME``). Taking a slot is one Lua
script that drops expired leases, checks the count against the maximum and
adds the new lease, so two gateways cannot both take the last slot. The
stream refreshes its lease while it is open (at each keep-alive) and removes it
when it ends; a lease of a gateway that crashed simply expires, and the next
acquire reclaims its slot. The ZSET itself expires after its last lease.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from spindle.shared.platform.redis_connect import RedisClient

KEY_PREFIX = "spindle:streams"

# KEYS[1] the tenant's ZSET; ARGV[1] lease id; ARGV[2] ttl ms; ARGV[3] max leases.
# Returns {acquired 0|1, leases held after the call, ms until the oldest lease expires}.
ACQUIRE_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local held = redis.call('ZCARD', KEYS[1])
if held >= tonumber(ARGV[3]) and not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, held, tonumber(oldest[2]) - now}
end
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {1, redis.call('ZCARD', KEYS[1]), 0}
"""

# KEYS[1] the tenant's ZSET; ARGV[1] lease id; ARGV[2] ttl ms.
# Re-adds a lease that expired meanwhile: its stream is still open, so it
# counts (the maximum is enforced when streams open, not while they run).
# Returns 1 when the lease was still held, 0 when it had to be re-added.
REFRESH_SCRIPT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
local held = score and tonumber(score) > now
redis.call('ZADD', KEYS[1], string.format('%d', now + ttl), ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
if held then return 1 end
return 0
"""


def stream_slots_key(tenant_id: str) -> str:
    """The Redis key of a tenant's stream leases."""
    return f"{KEY_PREFIX}:{{{tenant_id}}}"


@dataclass(frozen=True)
class SlotGrant:
    """The answer to an acquire.

    Attributes:
        acquired: the lease was added.
        held: leases the tenant holds after the call (including this one if acquired).
        retry_after: when refused, seconds until the oldest lease would expire
            if its stream stopped refreshing it (an upper bound of the wait
            when a holder died; live holders free slots when they close).
    """

    acquired: bool
    held: int
    retry_after: float


class StreamSlots:
    """Leases on a tenant's concurrent-stream slots.

    The slots object does not own its Redis client.

    Args:
        redis: an asyncio Redis client (any ``decode_responses``).
        lease_ttl_seconds: how long a lease lives without a refresh.
    """

    def __init__(self, redis: RedisClient, *, lease_ttl_seconds: float) -> None:
        if lease_ttl_seconds <= 0:
            raise ValueError("lease_ttl_seconds must be positive")
        self._redis = redis
        self.lease_ttl_ms = max(1, math.ceil(lease_ttl_seconds * 1000))
        self._acquire = redis.register_script(ACQUIRE_SCRIPT)
        self._refresh = redis.register_script(REFRESH_SCRIPT)

    @staticmethod
    def new_lease_id() -> str:
        """A lease id no other stream uses."""
        return uuid.uuid4().hex

    async def acquire(self, tenant_id: str, lease_id: str, *, max_leases: int) -> SlotGrant:
        """Add a lease if the tenant holds fewer than ``max_leases`` live ones.

        Acquiring a lease id the tenant already holds succeeds and refreshes it.

        Raises:
            ValueError: ``max_leases`` below 1.
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        if max_leases < 1:
            raise ValueError("max_leases must be at least 1")
        reply: Any = await self._acquire(
            keys=[stream_slots_key(tenant_id)], args=[lease_id, self.lease_ttl_ms, max_leases]
        )
        acquired, held, wait_ms = (int(v) for v in reply)
        return SlotGrant(bool(acquired), held, max(0, wait_ms) / 1000)

    async def refresh(self, tenant_id: str, lease_id: str) -> bool:
        """Move a lease's expiry to now + TTL (re-adding it if it expired).

        Returns:
            True when the lease was still live, False when it had expired.

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        reply: Any = await self._refresh(
            keys=[stream_slots_key(tenant_id)], args=[lease_id, self.lease_ttl_ms]
        )
        return bool(int(reply))

    async def release(self, tenant_id: str, lease_id: str) -> None:
        """Remove a lease (nothing happens if it is already gone).

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        await self._redis.zrem(stream_slots_key(tenant_id), lease_id)

    async def held(self, tenant_id: str) -> int:
        """Live leases of a tenant (expired ones are not counted).

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        # "(" makes the bound exclusive: a lease expiring exactly now is gone.
        now_s, now_us = await self._redis.time()
        now_ms = int(now_s) * 1000 + int(now_us) // 1000
        return int(await self._redis.zcount(stream_slots_key(tenant_id), f"({now_ms}", "+inf"))
