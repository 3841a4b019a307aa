"""A2A push notifications: per-task configs and the watcher that turns runs into pushes.

Design (durable, one delivery path):

- ``tasks/pushNotificationConfig/set`` (or a config inline in ``SendMessage``)
  stores the A2A config in a Redis hash per task (``configs:<task>``, with the
  caller's tenant and user), registers it with seed 003's ``PushOutbox`` under
  its own queue ``a2a:<task>:<config id>`` (URL plus the A2A headers:
  ``X-A2A-Notification-Token`` and ``Authorization: <scheme> <credentials>``),
  queues the task as it is now, and puts the task in the ``watch`` sorted set.
- Every gateway process runs a ``PushWatcher``: it claims due tasks of the
  watch set with a lease (so two gateways never advance the same task), reads
  the run's stored messages after the task's cursor (``cursor:<task>``, Redis
  then archive), maps them to A2A events exactly like a stream does
  (``run_events``: working, input-required, artifact + completed / failed /
  canceled) and queues each one for every config: a ``StreamResponse`` JSON
  for a config set over A2A 1.0, the Task / update event object over 0.3.
  A finished run leaves the watch set. State lives in Redis, so a restarted or
  different gateway picks up where the last one stopped, whether or not any
  client is attached.
- The workers' ``PushDelivery`` loop POSTs the queues with retries and
  backoff; a run never waits for a receiver.

The watcher lives in the gateway, not the worker, because turning messages
into A2A events (and reading how a run ended from Temporal and the archive) is
the gateway's ``run_events`` code; the workflows post nothing new. Delivery is
at least once: a gateway that dies between queueing and moving the cursor
queues those events again. A quiet run (waiting for a person) is polled with a
growing interval up to ``IDLE_POLL_MAX_SECONDS``.

Keys (the ``{push}`` hash tag of ``spindle.shared.tasks.push``)::

    spindle:{push}:a2a:configs:<task>  HASH config id → {tenant, user, protocol, config}
    spindle:{push}:a2a:cursor:<task>   STRING last run message seq turned into pushes
    spindle:{push}:a2a:watch           ZSET task → epoch ms when it is next due (leased)
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import orjson
from a2a.compat.v0_3.conversions import to_compat_stream_response
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.types import Task, TaskPushNotificationConfig
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict, ParseDict

from spindle.gateway.protocols.a2a.run_events import final_events
from spindle.gateway.protocols.a2a.task_mapping import (
    TERMINAL_STATES,
    IdleWatch,
    asks_for_input,
    input_required_event,
    progress_event,
)
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.state import GatewayState
from spindle.gateway.streams.history import stored_messages
from spindle.shared.contracts.errors import OutboundRefused
from spindle.shared.contracts.identity import Identity
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.shared.platform.outbound import OutboundPolicy, loggable_url
from spindle.shared.tasks.push import CONFIG_TTL_SECONDS, PushConfig, PushJob, PushOutbox

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient

log = logging.getLogger(__name__)

_PREFIX = "spindle:{push}:a2a"
WATCH_KEY = f"{_PREFIX}:watch"
LEASE_MS = 30_000
POLL_SECONDS = 0.2
IDLE_POLL_MAX_SECONDS = 2.0
CLAIM_BATCH = 16
PROTOCOL_0_3 = "0.3"
PROTOCOL_1_0 = "1.0"
# The id of a push config set without one (the A2A TCK reads it back by this
# id; the spec leaves it to the server).
DEFAULT_CONFIG_ID = "default"

# KEYS: watch. ARGV: now ms, lease ms, batch. Claims due tasks by pushing them ahead.
_CLAIM = """
local tasks = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])
for _, t in ipairs(tasks) do
  redis.call('ZADD', KEYS[1], 'XX', tonumber(ARGV[1]) + tonumber(ARGV[2]), t)
end
return tasks
"""


def _now_ms() -> int:
    return int(time.time() * 1000)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def configs_key(task_id: str) -> str:
    return f"{_PREFIX}:configs:{task_id}"


def cursor_key(task_id: str) -> str:
    return f"{_PREFIX}:cursor:{task_id}"


def queue_root(task_id: str, config_id: str) -> str:
    """The ``PushOutbox`` queue of one config (its own order and retries)."""
    return f"a2a:{task_id}:{config_id}"


def delivery_config(config: TaskPushNotificationConfig, tenant_id: str | None = None) -> PushConfig:
    """Where and how to POST, with the headers the A2A specification names."""
    headers: dict[str, str] = {}
    if config.token:
        headers["X-A2A-Notification-Token"] = config.token
    auth = config.authentication
    if config.HasField("authentication") and auth.scheme and auth.credentials:
        headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
    return PushConfig(url=config.url, headers=headers, tenant_id=tenant_id)


def validated(
    config: TaskPushNotificationConfig, task_id: str, policy: OutboundPolicy | None = None
) -> TaskPushNotificationConfig:
    """The config to store: an http(s) URL, the task id set, an id (default: ``default``).

    With ``policy``, the URL must also pass what the outbound policy judges
    without DNS (``checked_url`` adds the resolution).

    Raises:
        InvalidParamsError: the URL is not an absolute http or https URL, or the
            policy refuses it (the error names the problem).
    """
    url = urlparse(config.url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise InvalidParamsError(
            message=f"push notification url '{loggable_url(config.url)}' is not an http(s) URL",
            data={"field": "url", "reason": "must be an absolute http or https URL"},
        )
    if policy is not None:
        try:
            policy.check_url(config.url)
        except OutboundRefused as exc:
            raise _invalid_url(exc) from exc
    stored = TaskPushNotificationConfig()
    stored.CopyFrom(config)
    stored.task_id = task_id
    stored.tenant = ""
    if not stored.id:
        stored.id = DEFAULT_CONFIG_ID
    return stored


async def checked_url(config: TaskPushNotificationConfig, policy: OutboundPolicy) -> None:
    """Resolve the config's host and check every address (after ``validated``).

    Raises:
        InvalidParamsError: the policy refuses an address the host resolves to now.
    """
    try:
        await policy.check_registration(config.url)
    except OutboundRefused as exc:
        raise _invalid_url(exc) from exc


def _invalid_url(exc: OutboundRefused) -> InvalidParamsError:
    reason = (exc.errors[0].get("reason") if exc.errors else None) or exc.detail
    return InvalidParamsError(message=exc.detail, data={"field": "url", "reason": reason})


def push_body(event: Event, protocol: str = PROTOCOL_1_0) -> dict[str, Any]:
    """The A2A push body in the protocol the config was set with.

    1.0: the event as a ``StreamResponse`` (as the a2a-sdk sends it); 0.3: the
    ``Task`` or update event object itself (``kind`` names it).
    """
    response = to_stream_response(event)
    if protocol == PROTOCOL_0_3:
        result = to_compat_stream_response(response).result
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return MessageToDict(response)


def protocol_of(context: ServerCallContext) -> str:
    """The A2A version of the call: 0.3 method names have slashes (``tasks/get``)."""
    method = context.state.get("method")
    return PROTOCOL_0_3 if isinstance(method, str) and "/" in method else PROTOCOL_1_0


class PushConfigStore:
    """The A2A push configs of tasks, and the watch set their runs are followed by.

    Args:
        redis: the bus's Redis client.
    """

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self.outbox = PushOutbox(redis)

    async def put(
        self,
        identity: Identity,
        config: TaskPushNotificationConfig,
        *,
        snapshot: Task,
        cursor: int,
        protocol: str = PROTOCOL_1_0,
    ) -> None:
        """Store ``config``, queue ``snapshot`` for it and watch its task from ``cursor``.

        A task already finished is not watched: nothing will follow its snapshot.
        """
        task_id = config.task_id
        root = queue_root(task_id, config.id)
        entry = {
            "tenant": identity.tenant_id,
            "user": identity.user_id,
            "config": MessageToDict(config),
            "protocol": protocol,
        }
        await self.outbox.configure(root, delivery_config(config, identity.tenant_id))
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(configs_key(task_id), config.id, orjson.dumps(entry))
            pipe.expire(configs_key(task_id), CONFIG_TTL_SECONDS)
            pipe.set(cursor_key(task_id), cursor, nx=True, ex=CONFIG_TTL_SECONDS)
            await pipe.execute()
        await self.outbox.enqueue_job(root, PushJob(payload=push_body(snapshot, protocol)))
        if snapshot.status.state not in TERMINAL_STATES:
            await self.redis.zadd(WATCH_KEY, {task_id: _now_ms()}, nx=True)

    async def entries(self, task_id: str) -> dict[str, dict[str, Any]]:
        raw = await self.redis.hgetall(configs_key(task_id))
        return {_text(k): orjson.loads(v) for k, v in raw.items()}

    async def get(self, task_id: str, config_id: str) -> TaskPushNotificationConfig | None:
        """The config ``config_id`` of the task (none given: ``default``)."""
        key = configs_key(task_id)
        raw = await self.redis.hget(key, config_id or DEFAULT_CONFIG_ID)
        if raw is None and not config_id:
            # Stored before the default id was ``default``: named after the task.
            raw = await self.redis.hget(key, task_id)
        if raw is None:
            return None
        return _config_of(orjson.loads(raw))

    async def list(self, task_id: str) -> list[TaskPushNotificationConfig]:
        entries = await self.entries(task_id)
        return [_config_of(entries[k]) for k in sorted(entries)]

    async def delete(self, task_id: str, config_id: str) -> None:
        """Forget a config (its queued pushes are dropped); deleting twice is fine.

        No id means ``default`` (and a config stored under the task's id by an
        earlier release)."""
        config_ids = [config_id] if config_id else [DEFAULT_CONFIG_ID, task_id]
        async with self.redis.pipeline(transaction=True) as pipe:
            for one in config_ids:
                pipe.hdel(configs_key(task_id), one)
                pipe.delete(PushOutbox.config_key(queue_root(task_id, one)))
            await pipe.execute()


def _config_of(entry: dict[str, Any]) -> TaskPushNotificationConfig:
    return ParseDict(entry["config"], TaskPushNotificationConfig())


class PushWatcher(BackgroundLoop):
    """Follows watched tasks' runs and queues their A2A events (one per gateway process).

    Args:
        state: the gateway's state (bus, archive, temporal, settings).
    """

    name = "a2a push watcher"

    def __init__(self, state: GatewayState) -> None:
        self.state = state
        self.store = PushConfigStore(state.bus.redis)
        super().__init__()
        self._idle: dict[str, int] = {}  # task id → polls in a row that found nothing

    async def run(self) -> None:
        """Loop until cancelled; a Redis outage is waited out."""
        delay = POLL_SECONDS
        while True:
            self.stop_if_cancelled()
            try:
                await self.tick()
                delay = POLL_SECONDS
            except Exception as exc:
                log.warning("a2a push watcher: %s %s", type(exc).__name__, exc)
                delay = min(delay * 2, 30.0)
            await asyncio.sleep(delay)  # polling the watch set for due tasks

    async def tick(self) -> None:
        """Advance every due watched task once."""
        redis = self.store.redis
        claimed = await redis.eval(  # type: ignore[misc]
            _CLAIM, 1, WATCH_KEY, str(_now_ms()), str(LEASE_MS), str(CLAIM_BATCH)
        )
        if claimed:
            await asyncio.gather(*(self._advance_logged(_text(t)) for t in claimed))

    async def _advance_logged(self, task_id: str) -> None:
        try:
            await self.advance(task_id)
        except Exception as exc:  # retried at the next lease expiry
            log.warning("a2a push of %s: %s %s", task_id, type(exc).__name__, exc)

    async def advance(self, task_id: str) -> None:
        """Queue the events of the run's messages after the cursor; unwatch a finished run."""
        redis = self.store.redis
        entries = await self.store.entries(task_id)
        if not entries:
            await self._unwatch(task_id)
            return
        cursor = int(await redis.get(cursor_key(task_id)) or 0)
        archive = self.state.archive_if_enabled()
        stored = await stored_messages(
            task_id, bus=self.state.bus, archive=archive, after_seq=cursor
        )
        # An agent that answered and waits: input-required (with its answer when that
        # arrived in the same tick, else the IDLE's text).
        watch = IdleWatch()
        for item in stored:
            message = CompactMessage.model_validate_json(item.raw)
            events: list[Event] = []
            finished = False
            waiting = watch.event(task_id, message)
            if waiting is not None:
                events.append(waiting)
            elif asks_for_input(message):
                events.append(input_required_event(task_id, message))
            elif message.ends_conversation:
                events.extend(await final_events(self._call(entries), task_id, message))
                finished = True
            else:
                progress = progress_event(task_id, message)
                if progress is not None:
                    events.append(progress)
            for event in events:
                await self._queue(task_id, entries, event)
            await redis.set(cursor_key(task_id), item.seq, ex=CONFIG_TTL_SECONDS)
            if finished:
                await self._unwatch(task_id)
                return
        # A quiet run (waiting for a person, a long tool call) is polled less often.
        idle = self._idle[task_id] = 0 if stored else self._idle.get(task_id, 0) + 1
        delay = min(POLL_SECONDS * 2**idle, IDLE_POLL_MAX_SECONDS)
        await redis.zadd(WATCH_KEY, {task_id: _now_ms() + int(delay * 1000)}, xx=True)

    async def _queue(self, task_id: str, entries: dict[str, dict[str, Any]], event: Event) -> None:
        for config_id, entry in entries.items():
            job = PushJob(payload=push_body(event, entry.get("protocol", PROTOCOL_1_0)))
            await self.store.outbox.enqueue_job(queue_root(task_id, config_id), job)

    async def _unwatch(self, task_id: str) -> None:
        self._idle.pop(task_id, None)
        async with self.store.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(WATCH_KEY, task_id)
            pipe.delete(cursor_key(task_id))
            await pipe.execute()

    def _call(self, entries: dict[str, dict[str, Any]]) -> Caller:
        first = next(iter(entries.values()))
        identity = Identity(tenant_id=first["tenant"], user_id=first["user"], method="disabled")
        return Caller(identity=identity, state=self.state, base_url=self.state.settings.base_url)
