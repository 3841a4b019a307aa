"""Node reports, NodeMessage envelopes and archive writes that survive MongoDB outages.

MongoDB keeps what must outlive Redis, but a node never fails because MongoDB
is down: a write MongoDB cannot take now goes to the archive outbox in Redis
(``shared.archive_outbox``), which the worker's catch-up loop replays once
MongoDB answers; without an outbox, the write is logged and dropped.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson
from temporalio import activity

from shared import metrics
from shared.archive_outbox import SaveNodeReport, UpdateRun, archive_write
from shared.envelope import NodeMessage, NodeMessageMeta, TraceStep
from shared.run_models import NodeReport, NodeStatus
from shared.telemetry import annotate_node_span, item_count
from worker.activities.models import NodeExecution, RunRef

if TYPE_CHECKING:
    from shared.archive import RunArchive
    from shared.archive_outbox import ArchiveOutbox

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


def input_envelope(execution: NodeExecution, payload: Any) -> NodeMessage:
    """What the node received: its resolved params (and the previous output)."""
    return NodeMessage(
        messageId=_message_id(execution, "in"),
        **{"from": "_previous"},
        to=execution.node.id,
        timestamp=execution.started_at,
        payload=payload,
        context=_dict(execution.state.get("context")),
        meta=NodeMessageMeta(stepId=execution.node.id, status="pending"),
    )


def output_envelope(
    execution: NodeExecution,
    payload: Any,
    *,
    ports: list[str] | None = None,
    meta: dict[str, Any] | None = None,
    error: str | None = None,
) -> NodeMessage:
    """What the node produced, in seed 000's envelope."""
    now = now_iso()
    port = ports[0] if ports else None
    return NodeMessage(
        messageId=_message_id(execution, "out"),
        **{"from": execution.node.id},
        fromPort=port,
        timestamp=now,
        payload=payload,
        context=_dict(execution.state.get("context")),
        trace=[TraceStep.model_validate({"nodeId": execution.node.id, "port": port, "time": now})],
        meta=NodeMessageMeta.model_validate(
            {
                # Propagated metadata rides along; the envelope's own keys win.
                **{k: v for k, v in (meta or {}).items() if k not in _META_KEYS},
                "stepId": execution.node.id,
                "status": "error" if error else "done",
                "error": error,
            }
        ),
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class RunRecorder:
    """Writes of run documents and node reports that never fail a node.

    Args:
        archive: the archive (None: archiving is off).
        outbox: where writes MongoDB cannot take wait; default: the outbox
            attached to ``archive`` (see ``shared.archive_outbox.attach_outbox``).
    """

    def __init__(self, archive: RunArchive | None, outbox: ArchiveOutbox | None = None) -> None:
        self.archive = archive
        self.outbox = outbox

    async def save_report(
        self,
        execution: NodeExecution,
        report: NodeReport,
        *,
        input: NodeMessage | None = None,
        output: NodeMessage | None = None,
    ) -> None:
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
            return
        op = SaveNodeReport(
            workflow_id=execution.run.workflow_id,
            report=report,
            input=input.wire() if input else None,
            output=output.wire() if output else None,
        )
        await archive_write(self.archive, op, outbox=self.outbox)

    async def update_run(self, run: RunRef, **fields: Any) -> None:
        """Record a run's progress; creates the record from ``run`` if the
        gateway has not written it yet, so no update is lost to that race."""
        if "pending_input" in fields:
            _count_prompt(run.workflow_id, fields["pending_input"])
        if self.archive is None:
            return
        identity = {
            "run_id": run.run_id,
            "tenant_id": run.tenant_id,
            "graph_name": run.graph_name,
        }
        op = UpdateRun(workflow_id=run.workflow_id, create_with=identity, fields=fields)
        await archive_write(self.archive, op, outbox=self.outbox)


def _count_prompt(workflow_id: str, pending: Any) -> None:
    """``agent_items_queue_length``: a prompt is waiting while ``pending_input`` is set."""
    if isinstance(pending, dict):
        metrics.prompt_asked(workflow_id, str(pending.get("node_id", "")))
    else:
        metrics.prompts_answered(workflow_id)
