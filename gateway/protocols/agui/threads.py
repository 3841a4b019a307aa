"""Which Spindle run an AG-UI thread and an AG-UI run stand for (kept in Redis).

An AG-UI thread is one Spindle run (its latest); an AG-UI run is one segment of
that run's messages, from ``start_seq`` on (``event_mapper``). Both records are
per tenant: another tenant's thread is unknown, exactly as an unknown one. They
live as long as a run's stream (``history_ttl_days``).

The run record is claimed with SET NX before anything is started or answered,
so a POST repeated with the same ``runId`` (a reconnect, or a retry racing the
first) re-attaches to the segment instead of starting or answering twice.

A thread is rebound to a new run only by a caller who may control its current
run (its owner or a run-control role: ``run_stream._start``), and only if it
still stands for that run (``bind_thread`` compares and sets), so another user
of the tenant cannot take a thread over.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel

from spindle.shared.bus.message_bus import MessageBus

PREFIX = "spindle:agui"
# How long a claimed AG-UI run may take to start (or answer) before its id is free again.
CLAIM_SECONDS = 300
# KEYS[1] the thread; ARGV[1] the run it must stand for now ("" = none), ARGV[2] the
# new run, ARGV[3] the TTL. 1 when bound, 0 when the thread stands for another run.
BIND_SCRIPT = """
local now = redis.call('GET', KEYS[1]) or ''
if now ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'EX', tonumber(ARGV[3]))
return 1
"""


class AguiRunRecord(BaseModel):
    """One AG-UI run: the Spindle run it follows, from which seq, on which thread."""

    workflow_id: str = ""
    start_seq: int = 0
    graph: str = ""
    ready: bool = False
    awaits: str | None = None
    """The client_message_id of the user message this AG-UI run sent (it ends at the
    agent's IDLE after that message only)."""


def _thread_key(tenant_id: str, thread_id: str) -> str:
    return f"{PREFIX}:{{{tenant_id}}}:thread:{thread_id}"


def _run_key(tenant_id: str, thread_id: str, run_id: str) -> str:
    # The thread id's length first: ids may hold ':' and must not run into each other.
    return f"{PREFIX}:{{{tenant_id}}}:run:{len(thread_id)}:{thread_id}:{run_id}"


class AguiThreads:
    """The AG-UI records of every tenant, in the bus's Redis."""

    def __init__(self, bus: MessageBus) -> None:
        self._redis: Any = bus.redis
        self._ttl = bus.ttl_seconds

    async def thread_run(self, tenant_id: str, thread_id: str) -> str | None:
        """The workflow id of the thread's run (None: unknown thread)."""
        value = await self._redis.get(_thread_key(tenant_id, thread_id))
        return None if value is None else bytes(value).decode()

    async def set_thread_run(self, tenant_id: str, thread_id: str, workflow_id: str) -> None:
        await self._redis.set(_thread_key(tenant_id, thread_id), workflow_id, ex=self._ttl)

    async def bind_thread(
        self, tenant_id: str, thread_id: str, workflow_id: str, *, current: str | None
    ) -> bool:
        """Make the thread stand for ``workflow_id`` if it still stands for ``current``
        (None: a new thread); False when another request rebound it meanwhile."""
        bound = await self._redis.eval(
            BIND_SCRIPT,
            1,
            _thread_key(tenant_id, thread_id),
            current or "",
            workflow_id,
            self._ttl,
        )
        return bool(bound)

    async def claim_run(self, tenant_id: str, thread_id: str, run_id: str) -> bool:
        """True when this request is the first with ``run_id`` on the thread."""
        empty = AguiRunRecord().model_dump_json()
        # Short-lived until saved: a gateway that dies mid-start does not hold the id for long.
        claimed = await self._redis.set(
            _run_key(tenant_id, thread_id, run_id), empty, nx=True, ex=CLAIM_SECONDS
        )
        return bool(claimed)

    async def save_run(
        self, tenant_id: str, thread_id: str, run_id: str, record: AguiRunRecord
    ) -> None:
        body = record.model_copy(update={"ready": True}).model_dump_json()
        await self._redis.set(_run_key(tenant_id, thread_id, run_id), body, ex=self._ttl)

    async def release_run(self, tenant_id: str, thread_id: str, run_id: str) -> None:
        """Forget a claim whose start or answer failed (the client may try again)."""
        await self._redis.delete(_run_key(tenant_id, thread_id, run_id))

    async def run(self, tenant_id: str, thread_id: str, run_id: str) -> AguiRunRecord | None:
        """The AG-UI run's record (None: unknown, or still being started)."""
        value = await self._redis.get(_run_key(tenant_id, thread_id, run_id))
        if value is None:
            return None
        record = AguiRunRecord.model_validate(orjson.loads(value))
        return record if record.ready else None
