"""Run-start permits of the runs a schedule starts, shared by the gateway and the worker.

Every run takes one permit of its tenant's ``rate_limit_run_starts`` (GCRA in Redis,
``spindle.shared.platform.rate_limits``, key ``spindle:ratelimit:{<tenant>}:run_start``).
The gateway takes it before it starts a run. A schedule's runs are started by
Temporal, so the run takes it itself, in its first activity (``record_run_start``):

- **Timetable runs** take a permit there (``take_scheduled``). A run over the limit
  is refused: it runs none of its nodes and ends ``failed`` naming the setting
  (docs/schedules.md#tenants-and-limits).
- **Trigger and backfill** take their permits in the gateway, all before Temporal
  is asked (a 429 there starts nothing). The gateway then *prepays* the schedule's
  next runs (``prepay``): a run of that schedule uses a prepaid permit instead of
  taking one, so a triggered or backfilled run is counted once. Which of the
  schedule's runs uses a prepaid permit is whichever starts first; the count is
  the same. Prepaid permits not used within ``PREPAID_TTL_SECONDS`` expire.

Taking is idempotent per run: the decision is kept under the run's workflow id for
``DECISION_TTL_SECONDS`` (longer than ``record_run_start`` retries), so a retried
activity gets the same answer and never takes a second permit. The whole decision
(earlier answer, prepaid permit, GCRA) is one Lua script; all keys carry the
tenant's hash tag, so they share a Redis Cluster slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from spindle.shared.platform.rate_limits import KEY_PREFIX, rate_limit_key
from spindle.shared.platform.redis_connect import RedisClient

#: The action of the run-start limit (``rate_limit_run_starts``).
RUN_START = "run_start"
#: How long a prepaid permit of a trigger or backfill waits for its run (Temporal
#: starts them at once; a buffered backfill's runs may wait for the runs before them).
PREPAID_TTL_SECONDS = 86_400
#: How long a scheduled run's decision is kept for the retries of its activity.
DECISION_TTL_SECONDS = 86_400

# KEYS[1] the tenant's run-start limit; KEYS[2] this run's decision; KEYS[3] the
# schedule's prepaid permits. ARGV[1] emission interval (µs); ARGV[2] burst;
# ARGV[3] decision TTL (ms). The decision kept is 0 refused, 1 counted, 2 prepaid.
# Returns {allowed 0|1, µs until a permit, how}: how is 0 counted now, 1 an earlier
# decision of this run, 2 a prepaid permit.
SCHEDULED_TAKE_SCRIPT = """
local known = redis.call('GET', KEYS[2])
if known then return {math.min(tonumber(known), 1), 0, 1} end
local prepaid = tonumber(redis.call('GET', KEYS[3]) or 0)
if prepaid > 0 then
  if prepaid <= 1 then redis.call('DEL', KEYS[3]) else redis.call('DECR', KEYS[3]) end
  redis.call('SET', KEYS[2], '2', 'PX', ARGV[3])
  return {1, 0, 2}
end
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new_tat = tat + interval
local allow_until = now + burst * interval
if new_tat > allow_until then
  redis.call('SET', KEYS[2], '0', 'PX', ARGV[3])
  return {0, new_tat - allow_until, 0}
end
redis.call('SET', KEYS[1], string.format('%.0f', new_tat),
           'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
return {1, 0, 0}
"""

# KEYS[1] the schedule's prepaid permits; ARGV[1] the change (may be negative);
# ARGV[2] TTL (ms). Never leaves a count at or below 0.
PREPAY_SCRIPT = """
local left = redis.call('INCRBY', KEYS[1], ARGV[1])
if left <= 0 then redis.call('DEL', KEYS[1]) return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return left
"""


def prepaid_key(tenant_id: str, schedule_id: str) -> str:
    """The Redis key of a schedule's prepaid run-start permits."""
    return f"{rate_limit_key(tenant_id, RUN_START)}:prepaid:{schedule_id}"


def decision_key(tenant_id: str, workflow_id: str) -> str:
    """The Redis key of one scheduled run's permit decision."""
    return f"{KEY_PREFIX}:{{{tenant_id}}}:{RUN_START}:run:{workflow_id}"


@dataclass(frozen=True)
class ScheduledAdmission:
    """The answer for one scheduled run.

    Attributes:
        allowed: the run may run its graph.
        retry_after: when refused, seconds until the tenant's next permit.
        prepaid: the permit was taken earlier, by the gateway's trigger or backfill.
    """

    allowed: bool
    retry_after: float
    prepaid: bool


class RunStartPermits:
    """Run-start permits of scheduled runs (see the module docstring).

    Args:
        redis: an asyncio Redis client (not owned; any ``decode_responses``).
    """

    def __init__(self, redis: RedisClient) -> None:
        self._take = redis.register_script(SCHEDULED_TAKE_SCRIPT)
        self._prepay = redis.register_script(PREPAY_SCRIPT)

    async def take_scheduled(
        self, tenant_id: str, schedule_id: str, workflow_id: str, *, per_minute: int
    ) -> ScheduledAdmission:
        """One permit for the scheduled run ``workflow_id`` (idempotent per run).

        Args:
            tenant_id: whose limit.
            schedule_id: the schedule that started the run (its prepaid permits).
            workflow_id: the run; a second call answers as the first did.
            per_minute: ``rate_limit_run_starts`` (the burst is the same number).

        Raises:
            ValueError: ``per_minute`` below 1.
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        interval_us = math.ceil(60_000_000 / per_minute)
        reply: Any = await self._take(
            keys=[
                rate_limit_key(tenant_id, RUN_START),
                decision_key(tenant_id, workflow_id),
                prepaid_key(tenant_id, schedule_id),
            ],
            args=[interval_us, per_minute, DECISION_TTL_SECONDS * 1000],
        )
        allowed, wait_us, how = (int(v) for v in reply)
        return ScheduledAdmission(bool(allowed), wait_us / 1_000_000, how == 2)

    async def prepay(self, tenant_id: str, schedule_id: str, count: int) -> None:
        """Leave ``count`` permits (taken by the gateway) for the schedule's next runs.

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        await self._prepay(
            keys=[prepaid_key(tenant_id, schedule_id)], args=[count, PREPAID_TTL_SECONDS * 1000]
        )

    async def withdraw(self, tenant_id: str, schedule_id: str, count: int) -> None:
        """Take back prepaid permits whose runs Temporal did not start (a failed call).

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached.
        """
        await self._prepay(
            keys=[prepaid_key(tenant_id, schedule_id)], args=[-count, PREPAID_TTL_SECONDS * 1000]
        )


__all__ = [
    "DECISION_TTL_SECONDS",
    "PREPAID_TTL_SECONDS",
    "RUN_START",
    "RunStartPermits",
    "ScheduledAdmission",
    "decision_key",
    "prepaid_key",
]
