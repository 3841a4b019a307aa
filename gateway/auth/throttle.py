"""Failed-authentication throttling per client address, counted in Redis.

Every credential that does not verify costs a key-store lookup (or a JWT
check); without a cap one client could make the gateway ask MongoDB as fast as
it sends random keys. Each failure counts against the client's address in a
fixed window (``auth_failure_window_seconds``) shared by every gateway process;
past ``auth_failure_limit`` failures the address gets 429 with Retry-After,
before any lookup, until the window ends.

The address is the peer the server sees: behind a reverse proxy, run uvicorn
with ``--proxy-headers`` and ``--forwarded-allow-ips`` so it is the real client
(docs/operations/threat-model.md). Redis down: the throttle fails open, as the
tenant rate limits do (``limits.tenant_limits``).
"""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from spindle.shared.contracts.errors import RateLimited
from spindle.shared.platform.redis_connect import RedisClient

log = logging.getLogger(__name__)

KEY_PREFIX = "spindle:authfail"
# KEYS[1] the client's counter. Returns {failures so far, seconds left in the window}.
PEEK_SCRIPT = """
return {tonumber(redis.call('GET', KEYS[1]) or 0), redis.call('TTL', KEYS[1])}
"""
# KEYS[1] the client's counter; ARGV[1] the window. The first failure opens the window.
COUNT_SCRIPT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return n
"""


def failure_key(client: str) -> str:
    return f"{KEY_PREFIX}:{{{client}}}"


class AuthFailureThrottle:
    """Counts failed authentications per client address."""

    def __init__(self, redis: RedisClient, *, limit: int, window_seconds: int) -> None:
        self._peek = redis.register_script(PEEK_SCRIPT)
        self._count = redis.register_script(COUNT_SCRIPT)
        self.limit = limit
        self.window_seconds = window_seconds

    async def check(self, client: str) -> None:
        """Refuse a client that already failed ``limit`` times in the window.

        Raises:
            RateLimited: 429, Retry-After = the rest of the window.
        """
        try:
            count, ttl = await self._peek(keys=[failure_key(client)])
        except (RedisError, OSError) as exc:
            log.warning("failed-authentication throttle not checked: Redis: %s", exc)
            return
        if int(count) >= self.limit:
            raise RateLimited(
                f"too many failed authentications from this address: at most "
                f"{self.limit} per {self.window_seconds} s (auth_failure_limit)",
                retry_after=int(ttl) if ttl and int(ttl) > 0 else self.window_seconds,
            )

    async def failed(self, client: str) -> None:
        """Count one failed authentication of ``client``."""
        try:
            await self._count(keys=[failure_key(client)], args=[self.window_seconds])
        except (RedisError, OSError) as exc:
            log.warning("failed authentication not counted: Redis: %s", exc)
