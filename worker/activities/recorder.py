"""Node reports, NodeMessage envelopes and archive writes that survive MongoDB outages.

MongoDB keeps what must outlive Redis, but a node never fails because MongoDB
is down: a write MongoDB cannot take now goes to the archive outbox in Redis
(``spindle.worker.archive``), which the worker's catch-up loop replays once
MongoDB answers; without an outbox, the write is logged and dropped.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from temporalio import activity

from spindle.shared.contracts.runs import NodeReport, NodeStatus
from spindle.shared.platform import metrics
from spindle.shared.platform.telemetry import annotate_node_span, current_trace_ids, item_count
from spindle.shared.store.run_trace import (
    NodeFinished,
    NodeStarted,
    TraceEntry,
    TraceRole,
    bounded_output,
    port_key,
)
from spindle.worker.archive.operations import ArchiveOperation, UpdateRun
from spindle.worker.archive.writes import archive_later, archive_write, attached_outbox
from spindle.worker.contracts import NodeExecution, RunRef
from spindle.worker.contracts.envelope import (
    NodeMessage,
    NodeMessageMeta,
    StateUpdate,
    TraceStep,
    role_of,
    traced,
)
from spindle.worker.registry import spec_of

if TYPE_CHECKING:
    from spindle.shared.store.archive import RunArchive
    from spindle.worker.archive.outbox import ArchiveOutbox

logger = logging.getLogger(__name__)

SUMMARY_CHARS = 200
_META_KEYS = frozenset(
    {
        "stepId",
        "step_id",
        "status",
        "error",
        "userInputNeeded",
        "user_input_needed",
        "uiSchema",
        "ui_schema",
        "nodeType",
        "node_type",
        "role",
        "startTime",
        "start_time",
        "lastNode",
        "last_node",
    }
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str | None:
    """A short text of an output for reports (``None`` stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value
    else:
        try:
            text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def elapsed_ms_since(started_at: str | None) -> float:
    """Milliseconds from an ISO timestamp (workflow time) until now; 0 if unknown."""
    if not started_at:
        return 0.0
    try:
        start = datetime.fromisoformat(started_at)
    except ValueError:
        return 0.0
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return max(0.0, (datetime.now(UTC) - start).total_seconds() * 1000)


def build_report(
    execution: NodeExecution,
    status: NodeStatus,
    *,
    duration_ms: float,
    output: Any = None,
    error: str | None = None,
) -> NodeReport:
    attempt = activity.info().attempt if activity.in_activity() else 1
    return NodeReport(
        node_id=execution.node.id,
        node_type=execution.node.type,
        status=status,
        attempt=attempt,
        visit=execution.visit,
        started_at=execution.started_at,
        duration_ms=round(duration_ms, 3),
        output_summary=summarize(output),
        error=error,
    )


def _message_id(execution: NodeExecution, role: str) -> str:
    # Stable across retries, so a retried attempt rewrites the same envelope.
    name = f"{execution.run.workflow_id}:{execution.run.run_id}:{execution.node.id}"
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}:{execution.visit}:{role}"))


def _arrived(execution: NodeExecution) -> NodeMessage | None:
    """The latest envelope that arrived on an edge into the node (None: a run
    recorded before envelopes flowed)."""
    return execution.inputs[-1].message if execution.inputs else None


def input_envelope(execution: NodeExecution, payload: Any) -> NodeMessage:
    """What the node received: its resolved params, in the envelope that arrived
    last (its sender, ports, trace and meta; docs/graphs/envelopes.md)."""
    arrived = _arrived(execution)
    meta = NodeMessageMeta(stepId=execution.node.id, status="pending")
    if arrived is not None:
        meta = arrived.meta.model_copy(update={"step_id": execution.node.id, "status": "pending"})
    return NodeMessage(
        messageId=_message_id(execution, "in"),
        **{"from": arrived.from_ if arrived is not None else "_previous"},
        to=execution.node.id,
        fromPort=arrived.from_port if arrived is not None else None,
        toPort=arrived.to_port if arrived is not None else None,
        timestamp=execution.started_at,
        payload=payload,
        context=_dict(execution.state.get("context")),
        trace=arrived.trace if arrived is not None else [],
        traceCount=arrived.trace_count if arrived is not None else None,
        meta=meta,
    )


def output_envelope(
    execution: NodeExecution,
    payload: Any,
    *,
    ports: list[str] | None = None,
    meta: dict[str, Any] | None = None,
    error: str | None = None,
    updates: tuple[StateUpdate | None, StateUpdate | None] = (None, None),
) -> NodeMessage:
    """What the node produced, in seed 000's envelope: its path so far plus its own
    step (bounded, see ``traced``), and its writes to shared state and context."""
    now = now_iso()
    port = ports[0] if ports else None
    arrived = _arrived(execution)
    step = TraceStep.model_validate({"nodeId": execution.node.id, "port": port, "time": now})
    trace, count = traced(
        arrived.trace if arrived else [], (arrived.trace_count or 0) if arrived else 0, step
    )
    own = {
        "stepId": execution.node.id,
        "status": "error" if error else "done",
        "error": error,
        "nodeType": execution.node.type,
        "role": role_of(spec.runs if (spec := spec_of(execution.node.type)) else None),
        "lastNode": execution.node.id,
    }
    if arrived is not None:
        own["startTime"] = arrived.meta.start_time
    return NodeMessage(
        messageId=_message_id(execution, "out"),
        **{"from": execution.node.id},
        fromPort=port,
        timestamp=now,
        payload=payload,
        context=_dict(execution.state.get("context")),
        trace=trace,
        traceCount=count,
        # Propagated metadata rides along; the envelope's own keys win.
        meta=NodeMessageMeta.model_validate(
            {**{k: v for k, v in (meta or {}).items() if k not in _META_KEYS}, **own}
        ),
        stateUpdates=updates[0],
        contextUpdates=updates[1],
    )


def prompt_envelope(run: RunRef, pending: dict[str, Any]) -> NodeMessage:
    """Seed 000's prompt message: ``userInputNeeded`` with the prompt's uiSchema."""
    node_id = str(pending.get("node_id", ""))
    asked_at = str(pending.get("requested_at") or now_iso())
    name = f"{run.workflow_id}:{run.run_id}:{node_id}:{asked_at}:prompt"
    return NodeMessage(
        messageId=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
        **{"from": node_id},
        fromPort="output",
        timestamp=asked_at,
        meta=NodeMessageMeta.model_validate(
            {
                "stepId": node_id,
                "userInputNeeded": True,
                "uiSchema": pending.get("ui_schema"),
                "status": "pending",
            }
        ),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _attempt() -> int:
    return activity.info().attempt if activity.in_activity() else 1


def _entry(message: NodeMessage, role: TraceRole, node_id: str, visit: int | None) -> TraceEntry:
    return TraceEntry(
        message=message.wire(),
        node_id=node_id,
        visit=visit,
        attempt=_attempt(),
        role=role,
        trace_ids=current_trace_ids(),
    )


def _identity(run: RunRef) -> dict[str, Any]:
    return {"run_id": run.run_id, "tenant_id": run.tenant_id, "graph_name": run.graph_name}


# A node that ends sooner than this has its start recorded with its end, in one
# write: on a 50-node chain of quick tools a write of its own per start cost
# ~5 ms a node (MongoDB writes of one run queue behind each other).
NODE_START_RECORD_DELAY_SECONDS = 0.2


class NodeStartRecord:
    """The archive's record that a node started, written only if it still runs
    after ``NODE_START_RECORD_DELAY_SECONDS``.

    A timer, not a sleeping task: most nodes end first, and then nothing but the
    timer was made (no task to create, cancel and await per node).
    """

    def __init__(self, recorder: RunRecorder, execution: NodeExecution) -> None:
        self._task: asyncio.Task[None] | None = None
        self._timer = asyncio.get_running_loop().call_later(
            NODE_START_RECORD_DELAY_SECONDS, self._write, recorder, execution
        )

    def _write(self, recorder: RunRecorder, execution: NodeExecution) -> None:
        self._task = asyncio.create_task(recorder.node_started(execution))

    async def settle(self) -> bool:
        """Wait for a write under way, or call it off before it began.

        Returns:
            True when the start was written; False when the end must say it.
        """
        if self._task is not None:
            await self._task
            return True
        self._timer.cancel()
        return False

    def cancel(self) -> None:
        self._timer.cancel()
        if self._task is not None:
            self._task.cancel()


class RunRecorder:
    """Writes of run documents and node reports that never fail a node.

    Args:
        archive: the archive (None: archiving is off).
        outbox: where writes MongoDB cannot take wait; default: the outbox
            attached to ``archive`` (see ``spindle.worker.archive.writes.attach_outbox``).
        port_data_max_bytes: largest output archived by port; the activity classes
            pass ``Settings.archive_port_data_max_bytes``.
    """

    def __init__(
        self,
        archive: RunArchive | None,
        outbox: ArchiveOutbox | None = None,
        *,
        port_data_max_bytes: int,
    ) -> None:
        self.archive = archive
        self.outbox = outbox
        self.port_data_max_bytes = port_data_max_bytes

    async def save_report(
        self,
        execution: NodeExecution,
        report: NodeReport,
        *,
        input: NodeMessage | None = None,
        output: NodeMessage | None = None,
        current: bool = False,
    ) -> None:
        """Archive a node's report, its NodeMessages and its output by port.

        Args:
            current: also make the node the run's ``currentNodeId`` (its start
                was not recorded apart: see ``NodeStartRecord``).
        """
        op = self.finished(execution, report, input=input, output=output, current=current)
        if op is not None:
            await archive_write(self.archive, op, outbox=self.outbox)

    def finished(
        self,
        execution: NodeExecution,
        report: NodeReport,
        *,
        input: NodeMessage | None = None,
        output: NodeMessage | None = None,
        current: bool = False,
    ) -> NodeFinished | None:
        """Count a node's end (metrics, span) and build its archive operation
        (None: archiving is off); ``save_report`` writes it."""
        metrics.node_executed(
            execution.run.workflow_id, report.node_type, report.status.value, report.duration_ms
        )
        annotate_node_span(
            run_id=execution.run.workflow_id,
            node_id=report.node_id,
            node_type=report.node_type,
            status=report.status.value,
            item_count=item_count(output.payload) if output is not None else 1,
            duration_ms=report.duration_ms,
        )
        if self.archive is None:
            return None
        node, visit = execution.node.id, execution.visit
        trace = [_entry(input, "input", node, visit)] if input is not None else []
        if output is not None:
            trace.append(_entry(output, "output", node, visit))
        ports: dict[str, Any] = {}
        if output is not None and report.status is NodeStatus.SUCCESS:
            ports[port_key(output.from_port)] = bounded_output(
                output.payload, self.port_data_max_bytes
            )
        return NodeFinished(
            workflow_id=execution.run.workflow_id,
            run_id=execution.run.run_id,
            stream_id=execution.run.stream_id,
            report=report,
            input=input.wire() if input else None,
            output=output.wire() if output else None,
            trace=trace,
            port_data=ports,
            trace_id=current_trace_ids().get("traceId"),
            current_node_id=node if current else None,
            create_with=_create_with(execution) if current else {},
        )

    async def archive_later(self, *ops: ArchiveOperation | None) -> int | None:
        """Hand operations to the archiver in one round trip (see
        ``spindle.worker.archive.writes.archive_later``); None entries are skipped."""
        taken = [op for op in ops if op is not None]
        if self.archive is None or not taken:
            return None
        return await archive_later(self.archive, *taken, outbox=self.outbox)

    async def flushed(self, ticket: int | None) -> bool:
        """Wait (at most the outbox's write timeout) until the archiver has written
        everything queued up to ``ticket``; True when it has (or nothing was queued)."""
        outbox = self.outbox or attached_outbox(self.archive)
        if ticket is None or outbox is None:
            return True
        return await outbox.applied_through(ticket, within=outbox.write_timeout)

    async def node_started(self, execution: NodeExecution) -> None:
        """Record that a node began: the run's ``currentNodeId`` and ``current_nodes``."""
        if self.archive is None:
            return
        run = execution.run
        op = NodeStarted(
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            stream_id=run.stream_id,
            node_id=execution.node.id,
            create_with=_create_with(execution),
            fields=_trace_fields(),
        )
        await archive_write(self.archive, op, outbox=self.outbox)

    async def update_run(self, run: RunRef, **fields: Any) -> None:
        """Record a run's progress; creates the record from ``run`` if the
        gateway has not written it yet, so no update is lost to that race.

        A ``pending_input`` (a prompt asked) also makes its node current and
        records seed 000's prompt NodeMessage in the run's trace.
        """
        op = self.run_update(run, **fields)
        if op is not None:
            await archive_write(self.archive, op, outbox=self.outbox)

    def run_update(self, run: RunRef, **fields: Any) -> NodeStarted | UpdateRun | None:
        """Count a prompt asked or answered (metrics) and build the archive
        operation of ``update_run`` (None: archiving is off)."""
        pending = fields.get("pending_input")
        if "pending_input" in fields:
            _count_prompt(run.workflow_id, pending)
        if self.archive is None:
            return None
        fields.update(_trace_fields())
        if isinstance(pending, dict) and pending.get("node_id"):
            node_id = str(pending["node_id"])
            prompt = _entry(prompt_envelope(run, pending), "prompt", node_id, None)
            return NodeStarted(
                workflow_id=run.workflow_id,
                run_id=run.run_id,
                stream_id=run.stream_id,
                node_id=node_id,
                create_with=_identity(run),
                fields=fields,
                trace=[prompt],
            )
        return UpdateRun(workflow_id=run.workflow_id, create_with=_identity(run), fields=fields)


def _create_with(execution: NodeExecution) -> dict[str, Any]:
    """What a run document is created with by the first node write that finds none.

    A main run's document is created by whichever write comes first (the
    gateway's, a node's start or end); a workstream child has none of its own
    (its parent's stream tells of it).
    """
    run = execution.run
    if run.workstream_id != "main":
        return {}
    return {**_identity(run), "context": _dict(execution.state.get("context"))}


def _trace_fields() -> dict[str, Any]:
    """``trace_id`` of the current span, for the run document (none when untraced)."""
    trace_id = current_trace_ids().get("traceId")
    return {"trace_id": trace_id} if trace_id else {}


def _count_prompt(workflow_id: str, pending: Any) -> None:
    """``agent_prompts_pending``: a prompt is waiting while ``pending_input`` is set."""
    if isinstance(pending, dict):
        metrics.prompt_asked(workflow_id, str(pending.get("node_id", "")))
    else:
        metrics.prompts_answered(workflow_id)
