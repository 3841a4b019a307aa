"""Recorded tool calls and LLM turns of every run, for recorded replay (``call_records``).

A fork with ``tools: "recorded"`` (or ``llm: "recorded"``) answers a call from its
source run's record instead of calling the tool (or the model) again
(docs/replay-and-compare.md#recorded-replay). Every run records its calls::

    call_records  _id="<workflow_id>:<key>:<n>"; workflow_id (the run's root: its
                  stream, so a workstream child's calls are its parent's), node_id,
                  kind ("tool" | "llm"), name (the tool, or the model), key, n,
                  result (JSON text), recorded_at — index workflow_id

``key`` is a digest of what the call was asked (``tool_key``, ``llm_key``); ``n``
counts identical calls (same key) in the run, from 1, in the order they claimed it
(``claim_many``: a Redis hash per run, so an activity's retry keeps its ``n``). The n-th
identical call of a fork is answered by the n-th record of its source.

Bounded by two settings: ``call_records_max_per_run`` (claims past it return 0: not
recorded, and a fork's lookup misses) and ``call_record_max_result_bytes`` (a larger
result is not recorded). Records go through the archive's batched writer
(``SaveCallRecords``, an outbox operation), and ``spindle archive prune`` deletes them
with their run (the ``archive_retention_days`` setting).
"""

from __future__ import annotations

import asyncio
import hashlib
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel, Field
from pymongo import ASCENDING, InsertOne

from spindle.shared.bus.message_bus import stream_key
from spindle.shared.contracts.errors import NodeFailed
from spindle.shared.store.run_document import utcnow

if TYPE_CHECKING:
    from redis.commands.core import AsyncScript

    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.store.archive import ArchiveWrite, RunArchive

CALL_RECORDS = "call_records"
CallKind = Literal["tool", "llm"]

# KEYS[1]: the run's claims (a hash); ARGV: the most claims per run, the hash's time
# to live (ms), then a key digest and the claiming call's identity per claim. Returns
# each call's n (the same for the same identity: a retry), or 0 past the run's most.
CLAIM_SCRIPT = """
local most = tonumber(ARGV[1])
local out = {}
for i = 3, #ARGV, 2 do
  local mine = 'a:' .. ARGV[i + 1] .. ':' .. ARGV[i]
  local got = redis.call('HGET', KEYS[1], mine)
  if got then
    out[#out + 1] = tonumber(got)
  elseif tonumber(redis.call('HGET', KEYS[1], '#') or '0') >= most then
    out[#out + 1] = 0
  else
    redis.call('HINCRBY', KEYS[1], '#', 1)
    local n = redis.call('HINCRBY', KEYS[1], 'k:' .. ARGV[i], 1)
    redis.call('HSET', KEYS[1], mine, n)
    out[#out + 1] = n
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return out
"""

_SCRIPTS: weakref.WeakKeyDictionary[Any, AsyncScript] = weakref.WeakKeyDictionary()


class NoRecordedCall(NodeFailed):
    """A recorded replay (``on_miss: "fail"``) met a call its source run did not record."""


class CallKey(BaseModel):
    """What identifies a call for replay: its node, kind, name and digest."""

    node_id: str
    kind: CallKind
    name: str = Field(description="the tool's name, or the model")
    digest: str = Field(description="hex digest of the node, name and canonical request")
    described: str = Field(description="the call for error messages (bounded)")


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys (at every depth) and no whitespace."""
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def canonical_arguments(arguments: Mapping[str, Any]) -> bytes:
    """A tool's arguments as the tool sees them: null arguments dropped, keys sorted."""
    return canonical_json({name: value for name, value in arguments.items() if value is not None})


def _digest(*parts: bytes) -> str:
    hashed = hashlib.blake2b(digest_size=16)
    for part in parts:
        hashed.update(len(part).to_bytes(8, "big"))
        hashed.update(part)
    return hashed.hexdigest()


def tool_key(node_id: str, tool: str, arguments: Mapping[str, Any]) -> CallKey:
    """A tool call's key: node, tool name and canonical arguments."""
    args = canonical_arguments(arguments)
    return CallKey(
        node_id=node_id,
        kind="tool",
        name=tool,
        digest=_digest(b"tool", node_id.encode(), tool.encode(), args),
        described=f"node '{node_id}', tool '{tool}', arguments {_bounded(args)}",
    )


def llm_key(
    node_id: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]
) -> CallKey:
    """An LLM turn's key: node, the exact messages given (canonical JSON of the chat
    messages, tool calls included) and the model params that change the answer."""
    body = canonical_json(list(messages))
    model = str(params.get("model") or "")
    return CallKey(
        node_id=node_id,
        kind="llm",
        name=model,
        digest=_digest(b"llm", node_id.encode(), body, canonical_json(dict(params))),
        described=f"node '{node_id}', LLM turn of {len(messages)} messages "
        f"(model {model or 'default'})",
    )


def _bounded(text: bytes, limit: int = 300) -> str:
    decoded = text.decode(errors="replace")
    return decoded if len(decoded) <= limit else decoded[:limit] + "…"


def record_id(workflow_id: str, digest: str, n: int) -> str:
    return f"{workflow_id}:{digest}:{n}"


def claims_key(workflow_id: str) -> str:
    """The Redis hash of a run's claims (the run's stream hash tag)."""
    return stream_key(workflow_id, "call-claims")


async def claim_many(
    redis: RedisClient,
    workflow_id: str,
    calls: Sequence[tuple[str, str]],
    *,
    most: int,
    ttl_ms: int,
) -> list[int]:
    """Each call's n among identical calls of the run (1-based), in one script call.

    Args:
        calls: ``(key digest, identity)`` per call; the same identity (an activity's
            retry) gets the same n again.
        most: the run's most claims; past it a call's n is 0 (not recorded).
        ttl_ms: how long the run's claims stay after this one.
    """
    script = _SCRIPTS.get(redis)
    if script is None:
        script = _SCRIPTS[redis] = redis.register_script(CLAIM_SCRIPT)
    args: list[Any] = [most, ttl_ms]
    for digest, identity in calls:
        args.extend((digest, identity))
    got = await script(keys=[claims_key(workflow_id)], args=args)
    return [int(n) for n in got]


class ClaimBatcher:
    """Claims of calls made at once (a map batch's items, parallel tool calls) sent
    together: one script call per run per event-loop turn instead of one per call."""

    def __init__(self, redis: RedisClient, *, most: int, ttl_ms: int) -> None:
        self.redis = redis
        self.most = most
        self.ttl_ms = ttl_ms
        self._pending: dict[str, list[tuple[str, str, asyncio.Future[int]]]] = {}
        self._flushes: set[asyncio.Task[None]] = set()

    async def claim(self, workflow_id: str, digest: str, identity: str) -> int:
        """The call's n (see ``claim_many``)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        if not self._pending:
            # Runs after the calls already under way in this turn have claimed too.
            flush = loop.create_task(self._flush())
            self._flushes.add(flush)
            flush.add_done_callback(self._flushes.discard)
        self._pending.setdefault(workflow_id, []).append((digest, identity, future))
        return await future

    async def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        await asyncio.gather(*(self._send(run, calls) for run, calls in pending.items()))

    async def _send(
        self, workflow_id: str, calls: list[tuple[str, str, asyncio.Future[int]]]
    ) -> None:
        try:
            got = await claim_many(
                self.redis,
                workflow_id,
                [(digest, identity) for digest, identity, _ in calls],
                most=self.most,
                ttl_ms=self.ttl_ms,
            )
        except Exception as exc:
            for _, _, future in calls:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), n in zip(calls, got, strict=True):
            if not future.done():  # its caller may have been cancelled meanwhile
                future.set_result(n)


class RecordedCall(BaseModel):
    """One recorded call of a run (a ``call_records`` document less its run and time)."""

    node_id: str
    call_kind: CallKind
    name: str
    key: str
    n: int
    result: str = Field(description="the result as JSON text")


class SaveCallRecords(BaseModel):
    """Recorded calls of one run, as an archive (outbox) operation: one insert each,
    idempotent by id, in one bulk (a map batch's items go together)."""

    kind: Literal["call_records"] = "call_records"
    workflow_id: str
    records: list[RecordedCall]

    async def apply(self, archive: RunArchive) -> None:
        await archive.bulk_apply(self.writes())

    def writes(self) -> list[ArchiveWrite]:
        """The write requests of this operation (see ``RunArchive.bulk_apply``)."""
        recorded_at = utcnow()
        return [
            (
                CALL_RECORDS,
                InsertOne(
                    {
                        "_id": record_id(self.workflow_id, call.key, call.n),
                        "workflow_id": self.workflow_id,
                        "node_id": call.node_id,
                        "kind": call.call_kind,
                        "name": call.name,
                        "key": call.key,
                        "n": call.n,
                        "result": call.result,
                        "recorded_at": recorded_at,
                    }
                ),
            )
            for call in self.records
        ]

    def describe(self) -> str:
        return f"{len(self.records)} recorded calls of {self.workflow_id}"


async def recorded_result(archive: RunArchive, workflow_id: str, digest: str, n: int) -> str | None:
    """The n-th recorded result (JSON text) of the call ``digest`` in ``workflow_id``."""
    document = await archive.database[CALL_RECORDS].find_one(
        {"_id": record_id(workflow_id, digest, n)}, {"result": 1}
    )
    return None if document is None else str(document["result"])


async def ensure_call_record_indexes(archive: RunArchive) -> None:
    """The index ``spindle archive prune`` deletes a run's records by (idempotent)."""
    await archive.database[CALL_RECORDS].create_index([("workflow_id", ASCENDING)], name="workflow")
