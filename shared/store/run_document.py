"""A run's MongoDB document (collection ``runs``): its model and field names.

One document per run, ``_id`` = workflow id. It keeps Spindle's own fields
(snake_case, read by the gateway) and, beside them, seed 000's run document
("MongoDB Trace"), camelCase, kept current as the run moves:

=================  =============================================================
``workflowId``     the run's workflow id (= ``_id``)
``status``         ``running``, ``paused`` (waiting on a human), ``completed``,
                   ``failed``, ``canceled``, ``terminated``, ``timed_out``
``currentNodeId``  the node that started executing last; null once the run ended
``context``        the run's shared context
``portData``       ``{nodeId: {port: output}}``: the latest output of each node on
                   each port it chose (``output`` when it chose none); an output
                   of more than ``SPINDLE_ARCHIVE_PORT_DATA_MAX_BYTES`` is kept as
                   ``{"truncated": true, "bytes": n, "summary": "…"}`` (the node
                   report has it whole)
``trace``          where the run's NodeMessages are: ``{"collection": "run_trace",
                   "lastMessageId": …}``; a node's are in its node report, a
                   prompt's in ``run_trace`` (see ``spindle.shared.store.run_trace``),
                   not an array in this document
``pendingInput``   ``{nodeId, uiSchema, prompt, requestedAt}`` while paused for a
                   human (HITL), else null
``traceId``        the run's OpenTelemetry trace id (null when tracing is off)
``traceparent``    W3C trace context of the span that started the run (gateway)
=================  =============================================================

The mapping lives here, so that every writer (worker, gateway) derives the
seed fields the same way: ``document_fields`` turns a ``RunRecord`` update into
the document keys to ``$set``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

TRACE_COLLECTION = "run_trace"


def utcnow() -> datetime:
    # Mongo keeps milliseconds: truncate so what we write equals what we read.
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def as_utc(value: datetime) -> datetime:
    """Aware UTC; naive values (nx-27017, non-tz_aware clients) are UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def normalise(value: Any) -> Any:
    """Read side: every datetime as aware UTC, recursively."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, dict):
        return {key: normalise(item) for key, item in value.items()}
    if isinstance(value, list):
        return [normalise(item) for item in value]
    return value


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def storable(value: Any) -> Any:
    """Write side: models to dicts, enums to values, datetimes to UTC, recursively.

    An integer beyond 64 bits (a tool may return ``10**100``) is stored as its
    decimal string: BSON has no bigger integer, and the whole write (a run's
    output, a node report) would fail with it (docs/api/index.md).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value if _INT64_MIN <= value <= _INT64_MAX else str(value)
    if isinstance(value, BaseModel):
        return storable(value.model_dump(mode="python", by_alias=True))
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, dict):
        return {str(key): storable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item) for item in value]
    return value


class RunRecord(BaseModel):
    """A run as archived (and listed) by the gateway."""

    model_config = ConfigDict(populate_by_name=True)

    workflow_id: str
    run_id: str
    tenant_id: str = "default"
    user_id: str | None = None
    graph_name: str
    status: str
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: str | None = None
    # Who or what ended a run that did not complete (shared.contracts.run_end.EndedBy).
    ended_by: dict[str, Any] | None = None
    current_nodes: list[str] = Field(default_factory=list)
    pending_input: dict[str, Any] | None = None
    created_at: datetime
    updated_at: datetime
    temporal_ui_url: str | None = None
    current_node_id: str | None = Field(None, alias="currentNodeId")
    # ``portData`` is not part of the record: it is only written (by the worker,
    # see ``spindle.shared.store.run_trace``) and read where it is wanted, never listed.
    trace: dict[str, Any] = Field(default_factory=lambda: {"collection": TRACE_COLLECTION})
    trace_id: str | None = Field(None, alias="traceId")
    traceparent: str | None = None
    # The run's BudgetState (limits, usage, exhausted) as it ended: written by
    # finish_run, so GET /runs/{id} shows it after the end (docs/graphs/budgets.md).
    budget: dict[str, Any] | None = None
    # Written by finish_run: the run's continue-as-new count and node executions by
    # status, kept after Temporal forgets the run (docs/graphs/long-runs.md).
    generations: int | None = None
    node_counts: dict[str, int] | None = None
    # The conversation a run belongs to (POST /runs conversation_id): the run list's
    # filter; None for runs of no conversation and runs archived before it was kept.
    conversation_id: str | None = None
    # A fork's lineage (shared.contracts.forks.ReplaySource: source run, from_node,
    # overrides, graph, replay modes), written at its start: GET /runs/{id}'s
    # forked_from and the run list's forked_from filter (docs/replay-and-compare.md).
    forked_from: dict[str, Any] | None = None

    @field_validator("created_at", "updated_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        return as_utc(value)

    def to_document(self) -> dict[str, Any]:
        doc: dict[str, Any] = storable(self.model_dump(mode="python", by_alias=True))
        doc["_id"] = doc.pop("workflow_id")
        doc["workflowId"] = doc["_id"]
        doc["pendingInput"] = seed_pending_input(self.pending_input)
        doc["portData"] = {}
        return doc

    @classmethod
    def from_document(cls, doc: dict[str, Any]) -> RunRecord:
        data = normalise(dict(doc))
        data["workflow_id"] = data.pop("_id")
        data.pop("workflowId", None)
        if data.get("trace") is None:
            data.pop("trace", None)
        return cls.model_validate(data)


RUN_FIELDS = frozenset(RunRecord.model_fields) - {"workflow_id"}
# Document keys a run's progress changes; the rest identifies the run.
PROGRESS_KEYS = frozenset(
    {
        "status",
        "output",
        "error",
        "current_nodes",
        "pending_input",
        "updated_at",
        "currentNodeId",
        "portData",
        "trace",
        "pendingInput",
        "budget",
        "generations",
        "node_counts",
    }
)


def document_key(field: str) -> str:
    """The document key of a ``RunRecord`` field (its alias, if it has one)."""
    info = RunRecord.model_fields.get(field)
    return info.alias if info is not None and info.alias else field


def seed_pending_input(pending: Any) -> dict[str, Any] | None:
    """Seed 000's ``pendingInput`` of Spindle's ``pending_input``."""
    if not isinstance(pending, dict):
        return None
    return {
        "nodeId": pending.get("node_id"),
        "uiSchema": pending.get("ui_schema"),
        "prompt": pending.get("prompt"),
        "requestedAt": pending.get("requested_at"),
    }


def document_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Document keys and values to ``$set`` for an update of ``RunRecord`` fields,
    with the seed fields they imply.

    ``pending_input`` sets ``pendingInput`` (and, while a prompt waits, makes
    its node ``currentNodeId``); ``current_nodes`` set to empty (the run ended,
    or was terminated) clears ``currentNodeId`` and the pending input.

    Raises:
        ValueError: a field that ``RunRecord`` does not have.
    """
    unknown = set(fields) - RUN_FIELDS
    if unknown:
        raise ValueError(f"unknown run fields: {', '.join(sorted(unknown))}")
    doc = {document_key(name): storable(value) for name, value in fields.items()}
    if "pending_input" in fields:
        pending = seed_pending_input(fields["pending_input"])
        doc["pendingInput"] = pending
        if pending is not None and "current_node_id" not in fields:
            doc["currentNodeId"] = pending["nodeId"]
    if fields.get("current_nodes") == []:
        # The run ended (or was terminated): it is at no node and waits for nobody.
        if "current_node_id" not in fields:
            doc["currentNodeId"] = None
        if "pending_input" not in fields:
            doc["pending_input"] = doc["pendingInput"] = None
    return doc
