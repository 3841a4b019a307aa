"""Push notifications of seed 003: every task update POSTed to a callback URL.

A streaming-or-not ``tasks.execute`` may carry
``configuration.push_notification_config`` (``url``, ``headers``, ``token``).
The gateway stores it in Redis (never in the workflow's history: the headers
often hold a secret); every task event of the tree is then queued in Redis in
the same step that publishes it, and a background loop in every worker process
delivers the queue. A run never waits for a callback: a slow or failing
receiver only delays its own queue, which is retried with exponential backoff
and delivered in order (one tree's updates never overtake each other).

Keys (one hash tag so the Lua scripts run on Redis Cluster)::

    spindle:{push}:config:<root>   STRING PushConfig JSON (TTL)
    spindle:{push}:q:<root>        LIST of PushJob JSON, oldest first
    spindle:{push}:due             ZSET root → epoch ms when its head is due
                                   (a claimed root is pushed LEASE_MS ahead, so two
                                   workers never deliver the same queue at once)
    spindle:{push}:dead            LIST of jobs given up after MAX_ATTEMPTS
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Literal

import httpx
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spindle.shared.contracts.errors import ValidationFailed
from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.shared.tasks.events import TaskEvent

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient

logger = logging.getLogger(__name__)

CONFIG_TTL_SECONDS = 7 * 24 * 3600
LEASE_MS = 30_000
MAX_ATTEMPTS = 10
BACKOFF_FIRST_SECONDS = 0.2
BACKOFF_MAX_SECONDS = 60.0
POST_TIMEOUT_SECONDS = 10.0
IDLE_POLL_SECONDS = 0.2
CLAIM_BATCH = 16

_PREFIX = "spindle:{push}"
DUE_KEY = f"{_PREFIX}:due"
DEAD_KEY = f"{_PREFIX}:dead"

# KEYS: config, queue, due. ARGV: job, root, now ms, ttl s.
_ENQUEUE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call('ZADD', KEYS[3], 'NX', ARGV[3], ARGV[2])
return 1
"""
# KEYS: due. ARGV: now ms, lease ms, batch. Claims due roots by pushing them ahead.
_CLAIM = """
local roots = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, root in ipairs(roots) do
  redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[1]) + tonumber(ARGV[2]), root)
end
return roots
"""
# KEYS: queue, due. ARGV: delivered job, root. Pops the head if it is that job;
# forgets the root once its queue is empty (atomic with _ENQUEUE, so no job strands).
_DELIVERED = """
if redis.call('LINDEX', KEYS[1], 0) == ARGV[1] then redis.call('LPOP', KEYS[1]) end
if redis.call('LLEN', KEYS[1]) == 0 then
  redis.call('ZREM', KEYS[2], ARGV[2])
  return 0
end
return 1
"""


class PushConfig(BaseModel):
    """``configuration.push_notification_config`` of a request."""

    model_config = ConfigDict(extra="ignore")

    url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    token: str | None = Field(None, description="sent as 'Authorization: Bearer <token>'")
    method: Literal["POST"] = "POST"

    def request_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.headers}
        if self.token and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


class PushJob(BaseModel):
    """One update to deliver: the event (or a ready body) and how often delivery was tried."""

    event: TaskEvent | None = None
    payload: dict[str, Any] | None = Field(None, description="a ready body (A2A pushes)")
    attempts: int = 0

    def body(self) -> dict[str, Any]:
        """Seed 003's callback body (the event data plus its type), or the ready payload."""
        if self.payload is not None or self.event is None:
            return self.payload or {}
        return {"event": self.event.event, **self.event.data.model_dump(mode="json")}


def push_config_of(envelope: dict[str, Any], params: dict[str, Any]) -> PushConfig | None:
    """The push config of a JSON-RPC request (beside or inside ``params``).

    Raises:
        ValidationFailed: the config is present but malformed (-32602, naming the field).
    """
    for holder in (envelope, params):
        configuration = holder.get("configuration")
        if not isinstance(configuration, dict):
            continue
        raw = configuration.get("push_notification_config")
        if raw is None:
            raw = configuration.get("pushNotificationConfig")
        if raw is None:
            continue
        try:
            return PushConfig.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            path = "configuration.push_notification_config" + (f".{field}" if field else "")
            raise ValidationFailed(
                f"{path}: {first['msg']}", errors=[{"field": path, "reason": first["msg"]}]
            ) from exc
    return None


def backoff_seconds(attempts: int) -> float:
    return float(min(BACKOFF_FIRST_SECONDS * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS))


def _now_ms() -> int:
    return int(time.time() * 1000)


class PushOutbox:
    """The durable queue of callbacks, per executed tree.

    Args:
        redis: the bus's Redis client.
    """

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis

    @staticmethod
    def config_key(root_task_id: str) -> str:
        return f"{_PREFIX}:config:{root_task_id}"

    @staticmethod
    def queue_key(root_task_id: str) -> str:
        return f"{_PREFIX}:q:{root_task_id}"

    async def configure(self, root_task_id: str, config: PushConfig) -> None:
        """Send every later update of the tree to ``config.url``."""
        await self.redis.set(
            self.config_key(root_task_id), config.model_dump_json(), ex=CONFIG_TTL_SECONDS
        )

    async def enqueue(self, event: TaskEvent) -> bool:
        """Queue ``event`` if its tree has a push config; False when it has none."""
        return await self.enqueue_job(event.data.root_task_id, PushJob(event=event))

    async def enqueue_job(self, root: str, push_job: PushJob) -> bool:
        """Queue ``push_job`` under ``root`` if it has a push config; False when it has none."""
        job = push_job.model_dump_json()
        queued = await self.redis.eval(  # type: ignore[misc]
            _ENQUEUE,
            3,
            self.config_key(root),
            self.queue_key(root),
            DUE_KEY,
            job,
            root,
            str(_now_ms()),
            str(CONFIG_TTL_SECONDS),
        )
        return bool(queued)

    async def pending(self, root_task_id: str) -> int:
        return int(await self.redis.llen(self.queue_key(root_task_id)))

    async def drain(self, client: httpx.AsyncClient) -> int:
        """Deliver what is due now; returns how many callbacks succeeded."""
        roots = await self.redis.eval(  # type: ignore[misc]
            _CLAIM, 1, DUE_KEY, str(_now_ms()), str(LEASE_MS), str(CLAIM_BATCH)
        )
        if not roots:
            return 0
        counts = await asyncio.gather(
            *(self._deliver_queue(client, r.decode() if isinstance(r, bytes) else r) for r in roots)
        )
        return sum(counts)

    async def _deliver_queue(self, client: httpx.AsyncClient, root: str) -> int:
        delivered = 0
        raw_config = await self.redis.get(self.config_key(root))
        queue = self.queue_key(root)
        while True:
            raw = await self.redis.lindex(queue, 0)
            if raw is None or raw_config is None:
                if raw_config is None and raw is not None:
                    logger.warning("push config of tree %s expired; dropping its queue", root)
                    await self.redis.delete(queue)
                await self.redis.eval(_DELIVERED, 2, queue, DUE_KEY, "", root)  # type: ignore[misc]
                return delivered
            config = PushConfig.model_validate_json(raw_config)
            job = PushJob.model_validate_json(raw)
            if await self._post(client, config, job):
                delivered += 1
                more = await self.redis.eval(  # type: ignore[misc]
                    _DELIVERED, 2, queue, DUE_KEY, raw, root
                )
                if not more:
                    return delivered
                continue
            job.attempts += 1
            if job.attempts >= MAX_ATTEMPTS:
                logger.error("push to %s: giving up after %d attempts", config.url, job.attempts)
                async with self.redis.pipeline(transaction=True) as pipe:
                    pipe.rpush(DEAD_KEY, job.model_dump_json())
                    pipe.ltrim(DEAD_KEY, -1000, -1)
                    await pipe.execute()
                await self.redis.eval(_DELIVERED, 2, queue, DUE_KEY, raw, root)  # type: ignore[misc]
                return delivered
            due = _now_ms() + int(backoff_seconds(job.attempts) * 1000)
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.lset(queue, 0, job.model_dump_json())
                pipe.zadd(DUE_KEY, {root: due}, xx=True)
                await pipe.execute()
            return delivered

    @staticmethod
    async def _post(client: httpx.AsyncClient, config: PushConfig, job: PushJob) -> bool:
        try:
            reply = await client.post(
                config.url,
                content=orjson.dumps(job.body()),
                headers=config.request_headers(),
                timeout=POST_TIMEOUT_SECONDS,
            )
        except httpx.HTTPError as exc:
            logger.warning("push to %s failed: %s %s", config.url, type(exc).__name__, exc)
            return False
        if reply.is_success:
            return True
        logger.warning("push to %s answered %d; retrying later", config.url, reply.status_code)
        return False


class PushDelivery(BackgroundLoop):
    """Drains a ``PushOutbox`` in the background (one per worker process)."""

    name = "push delivery"

    def __init__(self, outbox: PushOutbox, *, idle_seconds: float = IDLE_POLL_SECONDS) -> None:
        self.outbox = outbox
        self.idle_seconds = idle_seconds
        super().__init__()

    async def run(self) -> None:
        """Loop until cancelled; Redis outages are waited out with backoff."""
        delay = self.idle_seconds
        async with httpx.AsyncClient(follow_redirects=False) as client:
            while True:
                try:
                    delivered = await self.outbox.drain(client)
                    delay = self.idle_seconds
                except Exception as exc:
                    logger.warning("push delivery waits for Redis: %s %s", type(exc).__name__, exc)
                    delivered = 0
                    delay = min(delay * 2, BACKOFF_MAX_SECONDS)
                if not delivered:
                    # Polling the due set: the next due time is at most this far off.
                    await asyncio.sleep(delay)
