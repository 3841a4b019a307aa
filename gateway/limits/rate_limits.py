"""Per-tenant rate limits in Redis with GCRA: the core lives in
``spindle.shared.platform.rate_limits``, where the worker uses it too (a schedule's
timetable runs take their run-start permit on the worker, docs/schedules.md).

This module keeps the gateway's import surface.
"""

from __future__ import annotations

from spindle.shared.platform.rate_limits import (
    GCRA_SCRIPT,
    KEY_PREFIX,
    REFUND_SCRIPT,
    RateDecision,
    RateLimiter,
    rate_limit_key,
)

__all__ = [
    "GCRA_SCRIPT",
    "KEY_PREFIX",
    "REFUND_SCRIPT",
    "RateDecision",
    "RateLimiter",
    "rate_limit_key",
]
