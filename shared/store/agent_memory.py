"""Agents' memory: each agent's whole conversation, stored by reference in Redis.

The workflow sends each ``llm_turn`` only the messages new since the previous
turn (``LlmTurnInput.messages``/``stored``); the activity writes them into the
agent's *memory log* and gives the model what the context policy keeps of it
(``spindle.worker.llm.context_policy``). A log outlives the loop visit, the workflow
generation (continue-as-new), a worker crash or restart and, for a thread, the
run: it is keyed by the agent and the run, or by the tenant's conversation.

Keys (one Cluster slot per log: the hash tag is the run's stream or the thread)::

    <base>:log    HASH  seq → {"m": message, "ts": ISO time, "k": estimated tokens}
    <base>:meta   HASH  len, dropped, summary, covered, system, memory (its kind),
                        visit:<id> → base seq
    run base      spindle:{<stream_id>}:mem:<workflow_id>:<memory key>
    thread base   spindle:{thread-<hash of tenant, conversation>}:mem:<node>
    run index     spindle:{<stream_id>}:mem-index
                  HASH <workstream>/<node> → base, latest:<workstream> → node
    thread index  spindle:{thread-<hash>}:mem-index   HASH <node> → base

``dropped`` only grows: the messages before it are out of the model's view for
good (summarized, under ``summarize``), so a turn loads only the live part of the
log and its cost does not grow with the conversation. Everything expires
``Settings.history_ttl_days`` after its last write, like the run's messages;
Redis persistence (AOF/RDB) decides whether a Redis restart keeps it
(docs/conversations.md, Memory).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from spindle.shared.bus.message_bus import stream_key
from spindle.shared.contracts.memory import estimate_tokens
from spindle.shared.platform.redis_connect import RedisClient

_Value = bytes | bytearray | memoryview | str | int | float
Fields = dict[_Value, _Value]


def run_memory_base(stream_id: str, workflow_id: str, memory_key: str) -> str:
    """The key prefix of an agent's memory in one run."""
    return stream_key(stream_id, f"mem:{workflow_id}:{memory_key}")


def thread_tag(tenant_id: str, conversation_id: str) -> str:
    """The hash tag of a tenant's conversation (names neither)."""
    digest = hashlib.sha256(f"{tenant_id}\0{conversation_id}".encode()).hexdigest()
    return f"thread-{digest[:32]}"


def thread_memory_base(tenant_id: str, conversation_id: str, node_id: str) -> str:
    """The key prefix of an agent's memory shared by the runs of a conversation."""
    return f"spindle:{{{thread_tag(tenant_id, conversation_id)}}}:mem:{node_id}"


def run_index_key(stream_id: str) -> str:
    """Which agents of a run's stream (its workstreams too) have a memory, and the
    latest agent per workstream."""
    return stream_key(stream_id, "mem-index")


def thread_index_key(tenant_id: str, conversation_id: str) -> str:
    """Which agents of a conversation have a shared memory."""
    return f"spindle:{{{thread_tag(tenant_id, conversation_id)}}}:mem-index"


def _text(value: bytes | str | None) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


@dataclass
class MemoryMeta:
    """The state of one memory log."""

    length: int = 0
    dropped: int = 0
    summary: str | None = None
    covered: int = 0
    system: str | None = None
    system_visit: str | None = None
    kind: str = "run"
    visits: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: dict[Any, Any]) -> MemoryMeta:
        fields = {_text(k) or "": _text(v) or "" for k, v in raw.items()}
        return cls(
            length=int(fields.get("len") or 0),
            dropped=int(fields.get("dropped") or 0),
            summary=fields.get("summary") or None,
            covered=int(fields.get("covered") or 0),
            system=fields.get("system"),
            system_visit=fields.get("system_visit") or None,
            kind=fields.get("memory") or "run",
            visits={k[6:]: int(v) for k, v in fields.items() if k.startswith("visit:")},
        )


@dataclass(frozen=True)
class Entry:
    """One stored message: its position, the message dump, when and its tokens."""

    seq: int
    message: dict[str, Any]
    ts: str
    tokens: int


class AgentMemory:
    """Reads and writes memory logs (see the module docstring).

    Args:
        redis: the bus's client.
        ttl_seconds: how long a log is kept after its last write.
    """

    def __init__(self, redis: RedisClient, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl_seconds = ttl_seconds

    async def meta(self, base: str) -> MemoryMeta:
        """The log's state (empty if it has none)."""
        return MemoryMeta.parse(await self.redis.hgetall(f"{base}:meta"))

    async def begin_visit(
        self, base: str, visit: str, opening: Sequence[dict[str, Any]]
    ) -> tuple[int, MemoryMeta]:
        """Where the visit's messages start in the log; the first call of a visit
        appends ``opening`` (its user prompt) first. A retried first turn gets the
        same position."""
        meta = await self.meta(base)
        if visit in meta.visits:
            return meta.visits[visit], meta
        start = meta.length
        await self.write(base, start, opening, extra={f"visit:{visit}": start + len(opening)})
        meta.length = start + len(opening)
        meta.visits[visit] = meta.length
        return meta.length, meta

    async def write(
        self,
        base: str,
        start: int,
        messages: Sequence[dict[str, Any]],
        *,
        extra: Fields | None = None,
    ) -> int:
        """Store ``messages`` at ``start``, ``start + 1``, … (upserts); the log's new length."""
        meta_fields: Fields = dict(extra or {})
        length = (await self.meta(base)).length
        if messages:
            now = datetime.now(UTC).isoformat()
            items: list[str | bytes] = []
            for offset, message in enumerate(messages):
                entry = {"m": message, "ts": now, "k": estimate_tokens(message)}
                items += [str(start + offset), orjson.dumps(entry)]
            length = max(length, start + len(messages))
            meta_fields["len"] = length
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.hset(f"{base}:log", items=items)
                pipe.hset(f"{base}:meta", mapping=meta_fields)
                pipe.expire(f"{base}:log", self.ttl_seconds)
                pipe.expire(f"{base}:meta", self.ttl_seconds)
                await pipe.execute()
        elif meta_fields:
            await self.set_meta(base, meta_fields)
        return length

    async def set_meta(self, base: str, fields: Fields) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(f"{base}:meta", mapping=fields)
            pipe.expire(f"{base}:meta", self.ttl_seconds)
            pipe.expire(f"{base}:log", self.ttl_seconds)
            await pipe.execute()

    async def entries(self, base: str, start: int, stop: int) -> list[Entry]:
        """The stored messages at ``start`` … ``stop - 1`` (missing ones skipped)."""
        if stop <= start:
            return []
        seqs = list(range(start, stop))
        raw = await self.redis.hmget(f"{base}:log", [str(s) for s in seqs])
        found: list[Entry] = []
        for seq, value in zip(seqs, raw, strict=True):
            if value is None:
                continue
            data = orjson.loads(value)
            found.append(Entry(seq=seq, message=data["m"], ts=data["ts"], tokens=int(data["k"])))
        return found

    async def advance(self, base: str, dropped: int, summary: str | None, covered: int) -> None:
        """Move the start of the model's view to ``dropped`` (with the new summary)."""
        fields: Fields = {"dropped": dropped, "covered": covered}
        if summary is not None:
            fields["summary"] = summary
        await self.set_meta(base, fields)

    async def index(
        self, run_index: str, workstream: str, node: str, base: str, thread_index: str | None
    ) -> None:
        """Record that ``node`` of ``workstream`` has a memory at ``base`` (its latest agent)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            fields: Fields = {f"{workstream}/{node}": base, f"latest:{workstream}": node}
            pipe.hset(run_index, mapping=fields)
            pipe.expire(run_index, self.ttl_seconds)
            await pipe.execute()
        if thread_index is not None:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hset(thread_index, mapping={node: base})
                pipe.expire(thread_index, self.ttl_seconds)
                await pipe.execute()

    async def lookup(self, run_index: str, workstream: str, node: str | None) -> tuple[str, str]:
        """``(node, base)`` of a run's agent (default: the workstream's latest agent);
        ``("", "")`` if it has none."""
        if node is None:
            node = _text(await self.redis.hget(run_index, f"latest:{workstream}"))
            if node is None:
                return "", ""
        base = _text(await self.redis.hget(run_index, f"{workstream}/{node}"))
        return (node, base) if base is not None else ("", "")

    async def thread_nodes(self, thread_index: str) -> dict[str, str]:
        """node → base of a conversation's shared memories."""
        raw = await self.redis.hgetall(thread_index)
        return {_text(k) or "": _text(v) or "" for k, v in raw.items()}
