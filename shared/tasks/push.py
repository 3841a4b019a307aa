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

Isolation (docs/protocols/outbound.md "Delivery isolation"): a delivery loop never waits
for a batch of POSTs. It peeks at the due roots, picks them round-robin across
tenants, starts each picked root's delivery as a task of its own (at most
``push_max_in_flight`` per process, ``push_per_destination`` per host and port)
and goes on; a destination that failed ``push_breaker_failures`` times in a row
is left alone for ``push_breaker_seconds`` (the per-destination count and the
breaker are ``shared.platform.destinations``, shared with the MCP client). So one
tenant's slow or dead receivers only delay that tenant's own queues. Every POST goes through the
outbound policy (``spindle.shared.platform.outbound``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import httpx
import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spindle.shared.contracts.errors import OutboundRefused, ValidationFailed
from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.shared.platform.destinations import (
    DestinationGate,
    GateLimits,
    destination_of,
)
from spindle.shared.platform.outbound import (
    FORBIDDEN_HEADERS,
    OutboundPolicy,
    guarded_client,
    loggable_url,
)
from spindle.shared.platform.webhook_signature import signature_headers
from spindle.shared.tasks.events import TaskEvent

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.platform.settings import Settings

logger = logging.getLogger(__name__)

CONFIG_TTL_SECONDS = 7 * 24 * 3600
LEASE_MS = 30_000
MAX_ATTEMPTS = 10
BACKOFF_FIRST_SECONDS = 0.2
BACKOFF_MAX_SECONDS = 60.0
IDLE_POLL_SECONDS = 0.2
# Due roots looked at per pass: enough to find every tenant's work behind one
# tenant's backlog of roots whose destinations are busy.
PEEK_WINDOW = 512
CONFIG_FIELD = "configuration.push_notification_config"

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
# KEYS: due. ARGV: now ms, lease ms, roots... Claims the named roots that are
# still due (another worker may have claimed one since the peek) by pushing them ahead.
_CLAIM = """
local claimed = {}
local now = tonumber(ARGV[1])
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) <= now then
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[i])
    table.insert(claimed, ARGV[i])
  end
end
return claimed
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
    tenant_id: str | None = Field(None, description="set by the gateway: fairness across tenants")
    signing_secret: str | None = Field(
        None,
        description="set by the gateway for run webhooks: each POST is signed "
        "(shared.platform.webhook_signature)",
    )

    def request_headers(self) -> dict[str, str]:
        own = {k: v for k, v in self.headers.items() if k.lower() not in FORBIDDEN_HEADERS}
        headers = {"Content-Type": "application/json", **own}
        if self.token and not any(k.lower() == "authorization" for k in headers):
            headers["Authorization"] = f"Bearer {self.token}"
        return headers


class PushJob(BaseModel):
    """One update to deliver: the event (or a ready body) and how often delivery was tried."""

    event: TaskEvent | None = None
    payload: dict[str, Any] | None = Field(None, description="a ready body (A2A pushes)")
    attempts: int = 0
    message_id: str | None = Field(
        None, description="the webhook-id of a signed delivery, the same on every retry"
    )

    def body(self) -> dict[str, Any]:
        """Seed 003's callback body (the event data plus its type), or the ready payload."""
        if self.payload is not None or self.event is None:
            return self.payload or {}
        return {"event": self.event.event, **self.event.data.model_dump(mode="json")}


def push_config_of(
    envelope: dict[str, Any], params: dict[str, Any], policy: OutboundPolicy | None = None
) -> PushConfig | None:
    """The push config of a JSON-RPC request (beside or inside ``params``).

    With ``policy``, its URL and headers must also pass what the outbound policy
    can judge without DNS (``checked_push_config`` adds the resolution).

    Raises:
        ValidationFailed: the config is present but malformed (-32602, naming the field).
        OutboundRefused: the policy refuses its URL or headers (-32602, naming the field).
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
            # Only the gateway signs (run webhooks): a caller cannot set the secret here.
            config = PushConfig.model_validate(raw).model_copy(update={"signing_secret": None})
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"])
            path = CONFIG_FIELD + (f".{field}" if field else "")
            raise ValidationFailed(
                f"{path}: {first['msg']}", errors=[{"field": path, "reason": first["msg"]}]
            ) from exc
        if policy is not None:
            try:
                policy.check_url(config.url)
            except OutboundRefused as exc:
                raise _renamed(exc) from exc
            policy.check_headers(config.headers, field=f"{CONFIG_FIELD}.headers")
        return config
    return None


def _renamed(exc: OutboundRefused) -> OutboundRefused:
    """The policy's refusal, naming the request's field."""
    reason = (exc.errors[0].get("reason") if exc.errors else None) or exc.detail
    return OutboundRefused(
        f"{CONFIG_FIELD}.url: {exc.detail}",
        errors=[{"field": f"{CONFIG_FIELD}.url", "reason": reason}],
    )


async def checked_push_config(
    envelope: dict[str, Any], params: dict[str, Any], policy: OutboundPolicy
) -> PushConfig | None:
    """``push_config_of`` with the policy, its host resolved and every address checked.

    Raises:
        ValidationFailed, OutboundRefused: as ``push_config_of``; also when the
            host resolves to a refused address (a name that does not resolve yet passes).
    """
    config = push_config_of(envelope, params, policy)
    if config is not None:
        try:
            await policy.check_registration(config.url)
        except OutboundRefused as exc:
            raise _renamed(exc) from exc
    return config


def backoff_seconds(attempts: int) -> float:
    return float(min(BACKOFF_FIRST_SECONDS * 2 ** max(attempts - 1, 0), BACKOFF_MAX_SECONDS))


def _now_ms() -> int:
    return int(time.time() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(frozen=True)
class DeliveryLimits:
    """How much push delivery one process does at once (see the module docstring)."""

    timeout_seconds: float = 5.0
    max_in_flight: int = 64
    per_destination: int = 4
    breaker_failures: int = 5
    breaker_seconds: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> DeliveryLimits:
        return cls(
            timeout_seconds=settings.push_timeout_seconds,
            max_in_flight=settings.push_max_in_flight,
            per_destination=settings.push_per_destination,
            breaker_failures=settings.push_breaker_failures,
            breaker_seconds=settings.push_breaker_seconds,
        )

    def gate_limits(self) -> GateLimits:
        """The per-destination cap and breaker, as the shared gate takes them."""
        return GateLimits(self.per_destination, self.breaker_failures, self.breaker_seconds)


class PushOutbox:
    """The durable queue of callbacks, per executed tree.

    Args:
        redis: the bus's Redis client.
        limits: the delivery side's concurrency, timeout and breaker.
    """

    def __init__(self, redis: RedisClient, limits: DeliveryLimits | None = None) -> None:
        self.redis = redis
        self.limits = limits or DeliveryLimits()
        self.gate = DestinationGate(self.limits.gate_limits(), what="push")
        self._in_flight: dict[str, str] = {}  # root → destination
        self._tasks: set[asyncio.Task[int]] = set()
        self.freed = asyncio.Event()

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

    @property
    def in_flight(self) -> int:
        """Roots this process is delivering now."""
        return len(self._in_flight)

    async def drain(self, client: httpx.AsyncClient) -> int:
        """Deliver what is due now and wait for it; returns how many callbacks succeeded."""
        tasks = await self.dispatch(client)
        return sum(await asyncio.gather(*tasks)) if tasks else 0

    async def dispatch(self, client: httpx.AsyncClient) -> list[asyncio.Task[int]]:
        """Start delivering due roots, fairly across tenants, within the limits.

        Returns at once with the started deliveries (each a task returning how
        many callbacks it delivered); never waits for a POST.
        """
        free = self.limits.max_in_flight - len(self._in_flight)
        if free <= 0:
            return []
        now = _now_ms()
        raw_roots = await self.redis.zrangebyscore(DUE_KEY, "-inf", now, start=0, num=PEEK_WINDOW)
        roots = [r for r in (_text(x) for x in raw_roots) if r not in self._in_flight]  # type: ignore[arg-type]
        if not roots:
            return []
        configs = await self.redis.mget([self.config_key(r) for r in roots])
        picked = await self._pick(roots, configs, free)
        if not picked:
            return []
        claimed = await self.redis.eval(  # type: ignore[misc]
            _CLAIM, 1, DUE_KEY, str(now), str(LEASE_MS), *[root for root, _ in picked]
        )
        destinations = dict(picked)
        started: list[asyncio.Task[int]] = []
        for root in (_text(r) for r in claimed or []):
            destination = destinations[root]
            self._in_flight[root] = destination
            self.gate.take(destination)
            task = asyncio.create_task(self._deliver_queue(client, root, destination))
            self._tasks.add(task)
            task.add_done_callback(functools.partial(self._finished, root=root))
            started.append(task)
        return started

    async def _pick(self, roots: list[str], configs: list[Any], free: int) -> list[tuple[str, str]]:
        """(root, destination) to start now: round-robin over tenants, skipping busy
        destinations; roots of a destination whose breaker is open are put off."""
        by_tenant: dict[str, deque[tuple[str, str]]] = {}
        held: dict[str, float] = {}
        for root, raw in zip(roots, configs, strict=True):
            tenant, destination = "", ""
            if raw is not None:
                try:
                    config = PushConfig.model_validate_json(raw)
                    tenant, destination = config.tenant_id or "", destination_of(config.url)
                except ValidationError:
                    pass  # _deliver_queue drops what it cannot read
            until = self.gate.open_until(destination) if destination else None
            if until is not None:
                held[root] = until
                continue
            by_tenant.setdefault(tenant, deque()).append((root, destination))
        if held:
            wall = time.time()
            await self.redis.zadd(
                DUE_KEY,
                {r: int((wall + until - time.monotonic()) * 1000) for r, until in held.items()},
                xx=True,
            )
        picked: list[tuple[str, str]] = []
        starting: dict[str, int] = {}
        queues = deque(by_tenant.values())
        while queues and len(picked) < free:
            queue = queues.popleft()
            while queue:
                root, destination = queue.popleft()
                if destination and not self.gate.has_room(
                    destination, starting.get(destination, 0)
                ):
                    continue
                starting[destination] = starting.get(destination, 0) + 1
                picked.append((root, destination))
                break
            if queue:
                queues.append(queue)
        return picked

    def _finished(self, task: asyncio.Task[int], *, root: str) -> None:
        self._tasks.discard(task)
        self.gate.give(self._in_flight.pop(root, ""))
        if not task.cancelled() and task.exception() is not None:
            logger.warning("push delivery of %s failed: %s", root, task.exception())
        self.freed.set()

    async def cancel_all(self) -> None:
        """Stop every delivery in flight (their roots come due again after the lease)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _deliver_queue(self, client: httpx.AsyncClient, root: str, destination: str) -> int:
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
            ok = await self._post(client, config, job)
            self.gate.record(destination, ok)
            if ok:
                delivered += 1
                more = await self.redis.eval(  # type: ignore[misc]
                    _DELIVERED, 2, queue, DUE_KEY, raw, root
                )
                if not more:
                    return delivered
                continue
            job.attempts += 1
            if job.attempts >= MAX_ATTEMPTS:
                logger.error(
                    "push to %s: giving up after %d attempts",
                    loggable_url(config.url),
                    job.attempts,
                )
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

    async def _post(self, client: httpx.AsyncClient, config: PushConfig, job: PushJob) -> bool:
        shown = loggable_url(config.url)
        body = orjson.dumps(job.body())
        headers = config.request_headers()
        if config.signing_secret and job.message_id:
            # Signed per attempt: the timestamp is this attempt's, the id the event's.
            headers.update(
                signature_headers(config.signing_secret, job.message_id, int(time.time()), body)
            )
        try:
            reply = await client.post(
                config.url, content=body, headers=headers, timeout=self.limits.timeout_seconds
            )
        except OutboundRefused as exc:
            logger.warning("push to %s refused by the outbound policy: %s", shown, exc.detail)
            return False
        except httpx.HTTPError as exc:
            logger.warning("push to %s failed: %s", shown, type(exc).__name__)
            return False
        if reply.is_success:
            return True
        logger.warning("push to %s answered %d; retrying later", shown, reply.status_code)
        return False


class PushDelivery(BackgroundLoop):
    """Drains a ``PushOutbox`` in the background (one per worker process).

    Args:
        outbox: the outbox (its ``limits`` bound the deliveries in flight).
        policy: the outbound policy every POST passes.
        idle_seconds: how long to wait when nothing could be started.
    """

    name = "push delivery"

    def __init__(
        self,
        outbox: PushOutbox,
        *,
        policy: OutboundPolicy | None = None,
        idle_seconds: float = IDLE_POLL_SECONDS,
    ) -> None:
        self.outbox = outbox
        self.policy = policy or OutboundPolicy()
        self.idle_seconds = idle_seconds
        super().__init__()

    async def run(self) -> None:
        """Loop until cancelled; Redis outages are waited out with backoff."""
        delay = self.idle_seconds
        limits = self.outbox.limits
        client = guarded_client(
            self.policy, timeout=limits.timeout_seconds, max_connections=limits.max_in_flight
        )
        try:
            while True:
                self.stop_if_cancelled()
                self.outbox.freed.clear()
                try:
                    started = await self.outbox.dispatch(client)
                    delay = self.idle_seconds
                except Exception as exc:
                    logger.warning("push delivery waits for Redis: %s %s", type(exc).__name__, exc)
                    started = []
                    delay = min(delay * 2, BACKOFF_MAX_SECONDS)
                if not started:
                    # Polling the due set (the next due time is at most this far
                    # off), or sooner when a delivery frees its slot.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.outbox.freed.wait(), delay)
        finally:
            await self.outbox.cancel_all()
            await client.aclose()
