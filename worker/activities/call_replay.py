"""Recorded calls in the activities: every run records, a recorded fork replays.

Each tool call (``tool_call``, a ``tool`` node in ``execute_node``, a map's inline
tool node per item) and each LLM turn (``llm_turn``) goes through ``CallRecorder``:

1. ``begin`` claims the call's ``n`` among identical calls of the run (one Redis
   script call; ``spindle.shared.store.call_records.claim``) and, when the run is a
   fork replaying that kind of call (``RunRef.replay``), reads the source run's n-th
   record of the same key: a match answers the call (``CallPlan.hit``). A miss on a
   source whose end is not archived yet waits for the archiver first and looks
   again (``archive_catch_up_seconds``). A miss that stays follows ``on_miss``:
   ``"live"`` calls for real, ``"fail"`` raises ``NoRecordedCall`` (non-retryable)
   naming the node, the tool and its arguments.
2. ``record`` turns the result into the archive operation that records it, which the
   activity hands to the archiver with its messages (no extra round trip).

The workflow sees only what the activity returned, so replaying its history is
unaffected (docs/replay-and-compare.md#recorded-replay).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import orjson
from temporalio import activity

from spindle.shared.contracts.budgets import TurnUsage
from spindle.shared.contracts.errors import to_application_error
from spindle.shared.contracts.runs import ENDED_STATUSES
from spindle.shared.store.call_records import (
    CallKey,
    ClaimBatcher,
    NoRecordedCall,
    RecordedCall,
    SaveCallRecords,
    llm_key,
    recorded_result,
)
from spindle.worker.archive.writes import attached_outbox
from spindle.worker.contracts import ChatMessage
from spindle.worker.contracts.workstream_tools import WORKSTREAM_TOOL_SPECS

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.platform.settings import Settings
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.activities.recorder import RunRecorder
    from spindle.worker.archive.operations import ArchiveOperation
    from spindle.worker.contracts import RunRef
    from spindle.worker.llm.base import LlmRequest
    from spindle.worker.posting.poster import MessagePoster

#: Sources remembered as ended per worker (the set starts over past it).
_ENDED_KEPT = 10_000

#: What a miss's wait for the archive found (``CallRecorder._catch_up``).
CatchUp = Literal["ended", "caught_up", "behind"]


@dataclass
class CallPlan:
    """One call's place in its run, and the source's answer when it is replayed."""

    run: RunRef
    key: CallKey
    n: int = 0
    recorded: str | None = None
    """The source run's recorded result (JSON text) when it matched."""
    replayed: bool = False
    """The run replays this kind of call: its messages carry ``d.recorded``."""

    @property
    def hit(self) -> bool:
        return self.recorded is not None

    def details(self) -> dict[str, Any]:
        """What the call's stream messages add: ``recorded`` in a replaying run only."""
        return {"recorded": self.hit} if self.replayed else {}


def _identity(part: str) -> str:
    """The claiming call: the activity execution (kept by its retries) and ``part``."""
    try:
        info = activity.info()
    except RuntimeError:  # called outside an activity (tests, tools): no retries
        return f"{uuid.uuid4().hex}:{part}"
    return f"{info.workflow_run_id}:{info.activity_id}:{part}"


class CallRecorder:
    """Claims, looks up and records the calls of this worker's runs.

    Args:
        redis: where the runs' claims are counted.
        archive: where records are kept (None: nothing is recorded nor replayed).
        settings: ``call_records_max_per_run``, ``call_record_max_result_bytes``,
            ``history_ttl_days`` (how long a run's claims stay in Redis).
    """

    def __init__(self, redis: RedisClient, archive: RunArchive | None, settings: Settings) -> None:
        self.redis = redis
        self.archive = archive
        self.most = settings.call_records_max_per_run
        self.max_result_bytes = settings.call_record_max_result_bytes
        self.catch_up_seconds = settings.archive_catch_up_seconds
        # Sources whose end is archived: a miss on them needs no catch-up.
        self._ended: set[str] = set()
        self.claims = ClaimBatcher(
            redis,
            most=settings.call_records_max_per_run,
            ttl_ms=settings.history_ttl_days * 86_400_000,
        )

    async def begin(self, run: RunRef, key: CallKey, *, part: str = "") -> CallPlan:
        """The call's plan: its n, and the recorded answer when the run replays it.

        Args:
            run: the run making the call (its stream is the root the records go under).
            key: what the call asks (``tool_key`` / ``llm_key``).
            part: tells calls of one activity apart (a map's item index).

        Raises:
            ApplicationError: ``NoRecordedCall`` (non-retryable) when the run replays
                this kind of call with ``on_miss: "fail"`` and nothing matches.
        """
        n = 0
        if self.archive is not None and self.most > 0:
            n = await self.claims.claim(run.stream_id, key.digest, _identity(part))
        replay = run.replay
        mode = None if replay is None else replay.tools if key.kind == "tool" else replay.llm
        if replay is None or mode != "recorded":
            return CallPlan(run=run, key=key, n=n)
        recorded, archive = None, "ended"
        if n and self.archive is not None:
            source = replay.source_workflow_id
            recorded = await recorded_result(self.archive, source, key.digest, n)
            if recorded is None:
                archive = await self._catch_up(source)
            if archive == "caught_up":
                recorded = await recorded_result(self.archive, source, key.digest, n)
        if recorded is None and replay.on_miss == "fail":
            behind = (
                f"; the source's archive was still behind after {self.catch_up_seconds:g} s "
                "(archive_catch_up_seconds)"
                if archive == "behind"
                else ""
            )
            raise to_application_error(
                NoRecordedCall(
                    f"no recorded call matches {key.described} in run "
                    f"'{replay.source_workflow_id}' (identical call {n or 'past the limit'}); "
                    f"the fork replays with on_miss 'fail'{behind}",
                    context={"node": key.node_id, "kind": key.kind, "name": key.name},
                )
            )
        return CallPlan(run=run, key=key, n=n, recorded=recorded, replayed=True)

    async def _catch_up(self, source: str) -> CatchUp:
        """After a miss: ``"caught_up"`` when the source's end was not archived yet and
        the archiver has now written what was queued before (look again), ``"ended"``
        when its end is archived (the miss is real), ``"behind"`` when the archiver did
        not catch up within ``archive_catch_up_seconds``.

        The archive writes a run's records before its end (one ordered queue), so a
        source whose document says it ended holds every record it will: its misses
        are real. Otherwise its last records may still be queued, e.g. behind a
        worker lost while draining.
        """
        if source in self._ended or self.archive is None:
            return "ended"
        document = await self.archive.runs.find_one({"_id": source}, {"status": 1})
        if document is not None and document.get("status") in ENDED_STATUSES:
            if len(self._ended) >= _ENDED_KEPT:
                self._ended.clear()
            self._ended.add(source)
            return "ended"
        outbox = attached_outbox(self.archive)
        if outbox is None:
            return "ended"  # no queue: every write went to MongoDB directly
        caught = await outbox.caught_up(within=self.catch_up_seconds)
        return "caught_up" if caught else "behind"

    def record(self, plan: CallPlan, result: Any) -> SaveCallRecords | None:
        """The operation that records ``result`` (JSON-able), or None when it is not
        recorded: past the run's most records, larger than the result limit, or no JSON."""
        if plan.n <= 0 or self.archive is None:
            return None
        try:
            text = orjson.dumps(result).decode()
        except TypeError:  # bytes or objects: not replayable as they were
            return None
        if len(text) > self.max_result_bytes:
            return None
        key = plan.key
        call = RecordedCall(
            node_id=key.node_id,
            call_kind=key.kind,
            name=key.name,
            key=key.digest,
            n=plan.n,
            result=text,
        )
        return SaveCallRecords(workflow_id=plan.run.stream_id, records=[call])


def replayed(plan: CallPlan) -> Any:
    """The recorded result of a plan that hit."""
    return orjson.loads(plan.recorded or "null")


def turn_key(node_id: str, request: LlmRequest) -> CallKey:
    """An LLM turn's key: the node, the exact messages given and the model params
    that change the answer (model, temperature, the tools offered)."""
    messages = [_keyed(message) for message in request.messages]
    params = {
        "model": request.model,
        "temperature": request.temperature,
        "tools": [tool.name for tool in request.tools],
    }
    return llm_key(node_id, messages, params)


def _keyed(message: ChatMessage) -> dict[str, Any]:
    """A message as the key sees it: a workstream tool's result is left out (the run
    answers it itself, with its own child ids and times), its call is kept."""
    dumped = message.model_dump(mode="json")
    if message.role == "tool" and message.name in WORKSTREAM_TOOL_SPECS:
        dumped["content"] = None
    return dumped


def turn_record(message: ChatMessage, usage: TurnUsage | None, details: dict[str, Any]) -> Any:
    """What an LLM turn records: the assistant message, its spend and the turn's
    ``model`` and ``usage`` details."""
    return {
        "message": message.model_dump(mode="json"),
        "usage": None if usage is None else usage.model_dump(mode="json"),
        "details": {k: details[k] for k in ("model", "usage") if k in details},
    }


def replayed_turn(
    plan: CallPlan, node_id: str, turn: int
) -> tuple[ChatMessage, TurnUsage | None, dict[str, Any]]:
    """The recorded turn of a plan that hit: its message, spend and details."""
    recorded = replayed(plan)
    message = ChatMessage.model_validate(recorded["message"])
    usage = recorded.get("usage")
    details = {"node_id": node_id, "turn": turn, **(recorded.get("details") or {})}
    return message, None if usage is None else TurnUsage.model_validate(usage), details


async def archive_with(
    poster: MessagePoster, recorder: RunRecorder, *ops: ArchiveOperation | None
) -> None:
    """``poster.archive()`` with more operations in the same hand-over (one push)."""
    posted = poster.archive_op()
    if posted is not None:
        await poster.check_current()
    await recorder.archive_later(posted, *ops)


@dataclass
class CallScope:
    """The recorder an ``execute_node`` (or map batch) activity lends its node's tool
    calls, and the records they made, to archive with the node's messages."""

    recorder: CallRecorder
    recorded: SaveCallRecords | None = None
    hits: int = 0
    """Calls answered from a record: no tool ran (the spend metrics leave them out)."""

    def add(self, op: SaveCallRecords | None) -> None:
        """Keep a call's record: the activity's records go to the archive in one bulk."""
        if op is None:
            return
        if self.recorded is None:
            self.recorded = op
        else:
            self.recorded.records.extend(op.records)

    @property
    def ops(self) -> list[ArchiveOperation]:
        """The archive operations of the records kept (none, or one)."""
        return [] if self.recorded is None else [self.recorded]


_SCOPE: ContextVar[CallScope | None] = ContextVar("spindle_call_scope", default=None)


@contextlib.contextmanager
def recording_calls(recorder: CallRecorder) -> Iterator[CallScope]:
    """Within: ``tool`` nodes record (and in a recorded fork replay) their calls."""
    scope = CallScope(recorder)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def call_scope() -> CallScope | None:
    """The activity's ``CallScope``, if it lends one."""
    return _SCOPE.get()
