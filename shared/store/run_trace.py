"""A run's NodeMessage trace and its progress in the run document (seed 000).

Seed 000 appends every NodeMessage of a run to a ``trace`` array in the run's
document. An array grows without bound (MongoDB caps a document at 16 MB), so
here the trace is kept per node: a node's input and output envelopes are in its
node report (``node_report_pages``: ``input``, ``output``, and ``trace``, their trace
fields), and a NodeMessage no report holds (a prompt's) is a document of its own
in the ``run_trace`` collection, keyed by its ``messageId`` and carrying its run::

    run_trace  _id=messageId; the envelope's fields (messageId, from, to,
               fromPort, toPort, type, timestamp, payload, context, trace, meta)
               plus workflowId, runId, nodeId, visit, attempt, role ("input",
               "prompt" or "output"), at (the envelope's time, a date), rank,
               streamId (the stream the run posts to: a workstream child's is
               its parent's), traceId, spanId (the span that recorded it;
               absent when tracing is off) — indexes (workflowId, at), streamId

A node report's ``trace`` entries are those fields less the envelope's (which
the report's ``input``/``output`` hold); ``run_trace()`` merges both, and reads
runs archived when every NodeMessage was a ``run_trace`` document alike. The
run document's ``trace`` field says where the last one is
(``{"collection": "run_trace", "lastMessageId": …}``).

The worker writes through two archive operations, so that MongoDB outages are
bridged by the archive outbox like every other write: ``NodeStarted`` (the node
becomes ``currentNodeId`` and joins ``current_nodes``) and ``NodeFinished`` (the
node report with its NodeMessages, its output in ``portData`` and its leaving
``current_nodes``). Every write is idempotent (upserts by id, ``$addToSet``,
``$pull``, ``$set``), so the outbox may replay one.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel, Field, ValidationInfo, field_serializer, field_validator
from pymongo import ReplaceOne, UpdateOne

from spindle.shared.contracts.runs import NodeReport
from spindle.shared.store.archive import NODE_REPORT_PAGES, node_report_write
from spindle.shared.store.run_document import (
    TRACE_COLLECTION,
    as_utc,
    document_fields,
    normalise,
    storable,
    utcnow,
)

if TYPE_CHECKING:
    from spindle.shared.store.archive import ArchiveWrite, RunArchive

SUMMARY_CHARS = 200
DEFAULT_PORT = "output"
TraceRole = Literal["input", "prompt", "output"]
# Order of a node's messages that share a timestamp.
_RANK = {"input": 0, "prompt": 1, "output": 2}
SAME_AS = "sameAs"
"""In a queued ``NodeFinished``, a trace entry's ``message`` that names the
operation's envelope it is (``{"messageId": …, "sameAs": "input"}``)."""


class TraceEntry(BaseModel):
    """One NodeMessage of a run, with who recorded it."""

    message: dict[str, Any] = Field(description="the NodeMessage envelope, as on the wire")
    node_id: str
    visit: int | None = Field(None, description="the node's visit (None: not known)")
    attempt: int = 1
    role: TraceRole
    trace_ids: dict[str, str] = Field(
        default_factory=dict, description="traceId / spanId of the recording span"
    )

    @property
    def message_id(self) -> str:
        return str(self.message["messageId"])

    def reference(
        self, workflow_id: str, run_id: str, stream_id: str | None = None
    ) -> dict[str, Any]:
        """The entry as its node report keeps it: ``document`` less the envelope's
        fields (the report's ``input`` or ``output`` is the envelope), ``messageId``
        kept to match them."""
        doc = self.document(workflow_id, run_id, stream_id)
        del doc["_id"]
        for key in self.message:
            if key != "messageId":
                doc.pop(key, None)
        return doc

    def document(
        self, workflow_id: str, run_id: str, stream_id: str | None = None
    ) -> dict[str, Any]:
        at = _parse_time(self.message.get("timestamp"))
        doc: dict[str, Any] = storable(self.message)
        doc.update(
            _id=self.message_id,
            workflowId=workflow_id,
            runId=run_id,
            streamId=stream_id or workflow_id,
            nodeId=self.node_id,
            visit=self.visit,
            attempt=self.attempt,
            role=self.role,
            rank=_RANK[self.role],
            at=at,
            **self.trace_ids,
        )
        return doc


def _parse_time(value: Any) -> datetime:
    if isinstance(value, str):
        try:
            parsed = as_utc(datetime.fromisoformat(value))
        except ValueError:
            return utcnow()
        # Mongo keeps milliseconds: what is written sorts as what is read.
        return parsed.replace(microsecond=parsed.microsecond // 1000 * 1000)
    return utcnow()


def bounded_output(value: Any, max_bytes: int) -> Any:
    """``value`` when its JSON is at most ``max_bytes``, else a summary of it."""
    try:
        raw = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=str)
    except TypeError:
        raw = repr(value).encode()
    if len(raw) <= max_bytes:
        return value
    text = raw.decode(errors="replace")
    return {"truncated": True, "bytes": len(raw), "summary": text[: SUMMARY_CHARS - 1] + "…"}


def port_key(port: str | None) -> str:
    """A port name usable as a document key (no ``.``, no leading ``$``)."""
    key = (port or DEFAULT_PORT).replace(".", "_")
    return "_" + key[1:] if key.startswith("$") else key


# -- operations (applied now, or replayed later by the archive outbox) ----------


class NodeStarted(BaseModel):
    """A node began executing: it becomes the run's ``currentNodeId`` and joins
    ``current_nodes`` (a prompt's request also sets ``pending_input``)."""

    kind: Literal["node_started"] = "node_started"
    workflow_id: str
    run_id: str
    stream_id: str | None = Field(None, description="the stream posted to; default: the run's")
    node_id: str
    create_with: dict[str, Any] = Field(
        default_factory=dict,
        description="identity to create the run with if it is not archived; empty: never create",
    )
    fields: dict[str, Any] = Field(
        default_factory=dict, description="other RunRecord fields to set with it"
    )
    trace: list[TraceEntry] = Field(default_factory=list)

    async def apply(self, archive: RunArchive) -> None:
        await archive.bulk_apply(self.writes())

    def writes(self) -> list[ArchiveWrite]:
        """The write requests of this operation (see ``RunArchive.bulk_apply``)."""
        to_set = document_fields({"current_node_id": self.node_id, **self.fields})
        update = {
            "$set": to_set,
            "$addToSet": {"current_nodes": self.node_id},
            "$currentDate": {"updated_at": True},
        }
        if self.create_with:
            update["$setOnInsert"] = insert_fields(self.workflow_id, self.create_with, to_set)
        run = UpdateOne({"_id": self.workflow_id}, update, upsert=bool(self.create_with))
        return [
            ("runs", run),
            *trace_writes(self.workflow_id, self.run_id, self.trace, self.stream_id),
        ]

    def describe(self) -> str:
        return f"start of node {self.node_id} in {self.workflow_id}"


class NodeFinished(BaseModel):
    """A node execution ended: its report, its NodeMessages, its output by port."""

    kind: Literal["node_finished"] = "node_finished"
    workflow_id: str
    run_id: str
    stream_id: str | None = Field(None, description="the stream posted to; default: the run's")
    report: NodeReport
    input: Any = None
    output: Any = None
    trace: list[TraceEntry] = Field(default_factory=list)
    port_data: dict[str, Any] = Field(
        default_factory=dict, description="port → (bounded) output; empty when it failed"
    )
    trace_id: str | None = None
    current_node_id: str | None = Field(
        None, description="set when the node's start was not recorded apart (a quick node)"
    )
    create_with: dict[str, Any] = Field(
        default_factory=dict,
        description="identity to create the run with if it is not archived; empty: never create",
    )

    # On its way through the archive outbox a node's input and output envelopes
    # would travel twice, as ``input``/``output`` and as their trace entries'
    # ``message``: a quarter of a queued ``pipeline`` run's bytes, serialized in the
    # node's activity and parsed again by the archiver. Those entries travel as a
    # reference to the envelope instead; entries queued in full (older workers)
    # read as before (docs/operations/observability.md#run-archive).

    @field_serializer("trace", when_used="json")
    def _trace_by_reference(self, trace: list[TraceEntry]) -> list[dict[str, Any]]:
        envelopes = {"input": self.input, "output": self.output}
        wire: list[dict[str, Any]] = []
        for entry in trace:
            envelope = envelopes.get(entry.role)
            if isinstance(envelope, dict) and envelope.get("messageId") == entry.message_id:
                data = entry.model_dump(mode="json", exclude={"message"})
                data["message"] = {"messageId": entry.message_id, SAME_AS: entry.role}
            else:
                data = entry.model_dump(mode="json")
            wire.append(data)
        return wire

    @field_validator("trace", mode="before")
    @classmethod
    def _trace_from_reference(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, list):
            return value
        return [_with_envelope(raw, info.data) for raw in value]

    async def apply(self, archive: RunArchive) -> None:
        await archive.bulk_apply(self.writes())

    def writes(self) -> list[ArchiveWrite]:
        """The write requests of this operation (see ``RunArchive.bulk_apply``)."""
        node = self.report.node_id
        run_set: dict[str, Any] = {
            f"portData.{node}.{port}": v for port, v in self.port_data.items()
        }
        if self.trace:
            run_set["trace"] = {
                "collection": TRACE_COLLECTION,
                "lastMessageId": self.trace[-1].message_id,
            }
        if self.trace_id:
            run_set["traceId"] = self.trace_id
        if self.current_node_id:
            run_set.update(document_fields({"current_node_id": self.current_node_id}))
        update: dict[str, Any] = {
            "$pull": {"current_nodes": node},
            "$currentDate": {"updated_at": True},
        }
        if run_set:
            update["$set"] = storable(run_set)
        if self.create_with:
            update["$setOnInsert"] = insert_fields(self.workflow_id, self.create_with, run_set)
        # The node's own NodeMessages (its input and output envelopes) live in its
        # report, which holds them anyway: one document a node, not three.
        kept, apart = self._split_trace()
        report = node_report_write(
            self.workflow_id,
            self.report,
            input=self.input,
            output=self.output,
            extra={
                "stream_id": self.stream_id or self.workflow_id,
                "trace": [
                    entry.reference(self.workflow_id, self.run_id, self.stream_id) for entry in kept
                ],
            },
        )
        run = UpdateOne({"_id": self.workflow_id}, update, upsert=bool(self.create_with))
        return [
            (NODE_REPORT_PAGES, report),
            *trace_writes(self.workflow_id, self.run_id, apart, self.stream_id),
            ("runs", run),
        ]

    def _split_trace(self) -> tuple[list[TraceEntry], list[TraceEntry]]:
        """(entries whose envelope is the report's ``input``/``output``, the others)."""
        envelopes = {"input": self.input, "output": self.output}
        kept: list[TraceEntry] = []
        apart: list[TraceEntry] = []
        for entry in self.trace:
            envelope = envelopes.get(entry.role)
            same = isinstance(envelope, dict) and envelope.get("messageId") == entry.message_id
            (kept if same else apart).append(entry)
        return kept, apart

    def describe(self) -> str:
        return f"end of node {self.report.node_id} in {self.workflow_id}"


def _with_envelope(raw: Any, fields: dict[str, Any]) -> Any:
    """A queued trace entry with the envelope its ``message`` refers to (``SAME_AS``)."""
    message = raw.get("message") if isinstance(raw, dict) else None
    if not isinstance(message, dict) or message.get(SAME_AS) not in ("input", "output"):
        return raw
    envelope = fields.get(message[SAME_AS])
    if isinstance(envelope, dict) and envelope.get("messageId") == message.get("messageId"):
        return {**raw, "message": envelope}
    return raw


# -- reads and writes -------------------------------------------------------------


def insert_fields(
    workflow_id: str, create_with: dict[str, Any], to_set: dict[str, Any]
) -> dict[str, Any]:
    """``$setOnInsert`` of a run document first written by a node's start or end:
    its identity, less what the same update sets."""
    on_insert = {k: v for k, v in document_fields(create_with).items() if k not in to_set}
    on_insert.update(workflowId=workflow_id, created_at=utcnow())
    if "status" not in to_set:
        on_insert.setdefault("status", "running")
    stored: dict[str, Any] = storable(on_insert)
    return stored


async def save_trace(
    archive: RunArchive,
    workflow_id: str,
    run_id: str,
    entries: list[TraceEntry],
    stream_id: str | None = None,
) -> None:
    """Store NodeMessages of a run; storing one again replaces it (idempotent).

    ``stream_id`` (default: the run's own) is kept as ``streamId``: a workstream
    child's NodeMessages go with its parent's stream when the parent is pruned.
    """
    if entries:
        await archive.bulk_apply(trace_writes(workflow_id, run_id, entries, stream_id))


def trace_writes(
    workflow_id: str, run_id: str, entries: list[TraceEntry], stream_id: str | None = None
) -> list[ArchiveWrite]:
    """The upserts of ``save_trace`` (storing one again replaces it)."""
    docs = [entry.document(workflow_id, run_id, stream_id) for entry in entries]
    return [(TRACE_COLLECTION, ReplaceOne({"_id": doc["_id"]}, doc, upsert=True)) for doc in docs]


async def run_trace(archive: RunArchive, workflow_id: str) -> list[dict[str, Any]]:
    """A run's NodeMessages in the order they were made (``_id`` left out).

    Those of ``run_trace`` (prompts; every NodeMessage of runs archived before node
    reports kept their own) and those kept in the run's node reports, merged.
    """
    found: dict[str, dict[str, Any]] = {}
    async for doc in archive.run_trace_coll.find({"workflowId": workflow_id}):
        found[str(doc.pop("_id"))] = normalise(doc)
    for report in await archive.node_reports(workflow_id):
        for entry in _report_entries(report):
            found.setdefault(str(entry["messageId"]), normalise(entry))
    return [
        found[key]
        for key in sorted(found, key=lambda k: (found[k].get("at"), found[k].get("rank", 0), k))
    ]


def _report_entries(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The NodeMessages a node report keeps: its envelopes with their trace fields."""
    entries = []
    for reference in report.get("trace") or ():
        envelope = report.get(str(reference.get("role")))
        if isinstance(envelope, dict) and envelope.get("messageId") == reference.get("messageId"):
            entries.append({**envelope, **reference})
    return entries


async def port_data(archive: RunArchive, workflow_id: str) -> dict[str, Any] | None:
    """The run document's ``portData`` (None: no such run)."""
    doc = await archive.runs.find_one({"_id": workflow_id}, {"portData": 1})
    if doc is None:
        return None
    value = doc.get("portData")
    return value if isinstance(value, dict) else {}


async def run_traceparent(archive: RunArchive, workflow_id: str) -> str | None:
    """The W3C trace context the run started under, if it was recorded."""
    doc = await archive.runs.find_one({"_id": workflow_id}, {"traceparent": 1})
    value = doc.get("traceparent") if doc is not None else None
    return value if isinstance(value, str) and value else None


async def message_trace_ids(archive: RunArchive, stream_id: str) -> list[dict[str, Any]]:
    """``{seq, traceId, spanId}`` of each archived message of a stream that has them."""
    return [
        {"seq": int(entry["seq"]), "traceId": entry["traceId"], "spanId": entry.get("spanId")}
        for entry in await archive.archived_messages(stream_id)
        if entry.get("traceId")
    ]


__all__ = [
    "NodeFinished",
    "NodeStarted",
    "TraceEntry",
    "bounded_output",
    "message_trace_ids",
    "port_data",
    "port_key",
    "run_trace",
    "run_traceparent",
    "save_trace",
]
