"""Runs Temporal closed without Spindle: noticed, explained, and their streams ended.

A ``GraphRun`` normally ends through its ``finish_run`` activity, which posts the
closing message and writes the run document. When Temporal closes the execution
itself — a terminate or cancel from the Temporal UI or CLI, a history or payload
limit, an execution timeout — no workflow code runs any more, so nothing would
tell the stream or the document (docs/design.md §10, rule 3).
``reconcile_closed_run`` does it from outside: given a workflow id whose latest
execution is closed while its stream has not ended or its document has no
reason, it reads the reason from Temporal (the close event, and the cancel
request for a cancelled run) and

* posts the same closing messages ``finish_run`` would have (TERMINATED with the
  reason; ERROR then COMPLETE for a failure), under fixed dedup keys, so that any
  number of callers post them once (and a stream that has ended refuses them);
* writes ``status`` and ``error`` to the run document, conditionally, so that a
  document that already says how the run ended is not overwritten.

Callers: ``GET /runs/{id}`` (the gateway), the SSE stream's keep-alive tick,
and ``ClosedRunSweep``, a background loop over the non-terminal run documents,
so that nobody has to be watching. Runs are always addressed by workflow id: a
run that continued as new is the same run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHistoryEventFilterType,
)
from temporalio.service import RPCError, RPCStatusCode

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform import metrics
from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.shared.store.archive import RunArchive, RunRecord

log = logging.getLogger(__name__)

RPC_TIMEOUT = timedelta(seconds=5)
TERMINAL_STATUSES = frozenset(
    s.value
    for s in (
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.CANCELED,
        RunStatus.TERMINATED,
        RunStatus.TIMED_OUT,
    )
)
OPEN_STATUSES = (RunStatus.RUNNING.value, RunStatus.PAUSED.value)
CLOSED_OUTSIDE = {
    WorkflowExecutionStatus.TERMINATED: RunStatus.TERMINATED,
    WorkflowExecutionStatus.TIMED_OUT: RunStatus.TIMED_OUT,
    WorkflowExecutionStatus.CANCELED: RunStatus.CANCELED,
    WorkflowExecutionStatus.FAILED: RunStatus.FAILED,
}
# Temporal's default hard limits (dynamic config limit.historyCount.error and
# limit.historySize.error): past them the server terminates the run.
HISTORY_EVENTS_LIMIT = 51_200
HISTORY_BYTES_LIMIT = 50 * 1024 * 1024

OnClosed = Callable[[RunRecord | None, RunStatus, str], Awaitable[None]]


@dataclass(frozen=True)
class ClosedRun:
    """What ``reconcile_closed_run`` found and did."""

    workflow_id: str
    status: RunStatus
    reason: str
    posted: bool
    """The closing message was stored now (False: the stream had already ended)."""
    recorded: bool
    """The run document was updated now."""


def history_usage(description: WorkflowExecutionDescription) -> tuple[int, int]:
    """The execution's history length (events) and size (bytes) from describe."""
    info = description.raw_description.workflow_execution_info
    return int(info.history_length), int(info.history_size_bytes)


def _seconds(value: Any) -> str:
    seconds = value.ToTimedelta().total_seconds() if value is not None else 0
    return f"{seconds:g}s" if seconds else "its"


async def _events(
    temporal: Client, workflow_id: str, run_id: str, *, close_only: bool
) -> list[HistoryEvent]:
    handle = temporal.get_workflow_handle(workflow_id, run_id=run_id)
    kind = (
        WorkflowHistoryEventFilterType.CLOSE_EVENT
        if close_only
        else WorkflowHistoryEventFilterType.ALL_EVENT
    )
    return [
        event
        async for event in handle.fetch_history_events(
            event_filter_type=kind, rpc_timeout=RPC_TIMEOUT
        )
    ]


async def close_reason(temporal: Client, description: WorkflowExecutionDescription) -> str:
    """Why Temporal closed the execution, in a sentence a user can act on."""
    status = description.status
    wid, rid = description.id, description.run_id
    try:
        if status == WorkflowExecutionStatus.CANCELED:
            # The reason and who asked are on the request, not on the close event.
            for event in await _events(temporal, wid, rid, close_only=False):
                if event.HasField("workflow_execution_cancel_requested_event_attributes"):
                    req = event.workflow_execution_cancel_requested_event_attributes
                    why = f": {req.cause}" if req.cause else ""
                    who = f" by {req.identity}" if req.identity else ""
                    return f"canceled through Temporal{who}{why}"
            return "canceled through Temporal"
        events = await _events(temporal, wid, rid, close_only=True)
    except RPCError as exc:
        log.warning("close event of %s unavailable: %s", wid, exc)
        events = []
    last = events[-1] if events else None
    if status == WorkflowExecutionStatus.TERMINATED:
        if last is not None and last.HasField("workflow_execution_terminated_event_attributes"):
            term = last.workflow_execution_terminated_event_attributes
            who = f" by {term.identity}" if term.identity else ""
            return f"terminated through Temporal{who}: {term.reason or 'no reason given'}"
        return "terminated through Temporal"
    if status == WorkflowExecutionStatus.TIMED_OUT:
        config = description.raw_description.execution_config
        if config.HasField("workflow_execution_timeout"):
            limit = _seconds(config.workflow_execution_timeout)
            return f"timed out: the run exceeded {limit} execution timeout"
        if config.HasField("workflow_run_timeout"):
            limit = _seconds(config.workflow_run_timeout)
            return f"timed out: the run exceeded {limit} run timeout"
        return "timed out: the run exceeded its execution timeout"
    if last is not None and last.HasField("workflow_execution_failed_event_attributes"):
        failure = last.workflow_execution_failed_event_attributes.failure
        return failure.message or "the run failed"
    return f"the run ended in Temporal as {status.name if status else 'unknown'}"


def needs_reconcile(record: RunRecord | None) -> bool:
    """A document that does not (yet) say how a closed run ended, or why."""
    if record is None:
        return True
    if record.status not in TERMINAL_STATUSES:
        return True
    return record.status != RunStatus.COMPLETED.value and not record.error


async def _post_closing(bus: MessageBus, workflow_id: str, status: RunStatus, reason: str) -> bool:
    """The closing messages ``finish_run`` would have posted; True if stored now."""
    details = {"status": status.value, "error": reason, "closed_by": "temporal"}
    if status == RunStatus.FAILED:
        items = [
            (AgentMessageType.ERROR, reason, {"error": reason}),
            (AgentMessageType.COMPLETE, "Run failed", details),
        ]
    else:
        items = [(AgentMessageType.TERMINATED, reason, details)]
    stored = False
    for index, (kind, text, extra) in enumerate(items):
        message = create_compact_message(kind, text, details=extra)
        # Fixed keys: every caller (route, stream, sweep, other gateways) posts
        # the same messages, and the bus keeps the first of each only.
        result = await bus.post(workflow_id, message, dedup_key=f"{workflow_id}:closed:{index}")
        stored = stored or not (result.duplicate or result.closed)
    return stored


async def _record_close(
    archive: RunArchive, record: RunRecord, status: RunStatus, reason: str
) -> bool:
    """Write status and error unless the document already says how the run ended."""
    if record.status in TERMINAL_STATUSES:
        # finish_run wrote the status (a cancel it handled) but no reason: add one.
        query: dict[str, Any] = {"_id": record.workflow_id, "status": record.status, "error": None}
        update: dict[str, Any] = {"error": reason}
    else:
        query = {"_id": record.workflow_id, "status": {"$in": list(OPEN_STATUSES)}}
        update = {
            "status": status.value,
            "error": reason,
            "current_nodes": [],
            "currentNodeId": None,
            "pending_input": None,
            "pendingInput": None,
        }
    result = await archive.runs.update_one(
        query, {"$set": update, "$currentDate": {"updated_at": True}}
    )
    return result.modified_count > 0


async def reconcile_closed_run(
    workflow_id: str,
    *,
    temporal: Client,
    bus: MessageBus,
    archive: RunArchive | None,
    description: WorkflowExecutionDescription | None = None,
    record: RunRecord | None = None,
    on_closed: OnClosed | None = None,
) -> ClosedRun | None:
    """Tell the stream and the run document that Temporal closed the run, once.

    Args:
        workflow_id: the run.
        description: Temporal's description of its latest execution, if at hand.
        record: its run document, if at hand.
        on_closed: called once the closing message was stored now (e.g. to
            settle the run's tasks).

    Returns:
        What was found and done; None when the run is open, ended through
        Spindle, or unknown to Temporal.

    Raises:
        RPCError: Temporal cannot be reached.
    """
    if description is None:
        try:
            description = await temporal.get_workflow_handle(workflow_id).describe(
                rpc_timeout=RPC_TIMEOUT
            )
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
    status = CLOSED_OUTSIDE.get(description.status) if description.status else None
    if status is None:
        return None  # open, completed (finish_run ran) or continued as new
    if record is None and archive is not None:
        record = await archive.get_run(workflow_id)
    stream_open = await bus.end_seq(workflow_id) is None
    if not stream_open and not needs_reconcile(record):
        return None
    reason = await close_reason(temporal, description)
    posted = await _post_closing(bus, workflow_id, status, reason) if stream_open else False
    recorded = False
    if archive is not None and record is not None and needs_reconcile(record):
        recorded = await _record_close(archive, record, status, reason)
    if posted:
        log.warning("run %s was closed by Temporal (%s): %s", workflow_id, status.value, reason)
        metrics.run_closed_outside(status.value)
        if on_closed is not None:
            await on_closed(record, status, reason)
    return ClosedRun(workflow_id, status, reason, posted=posted, recorded=recorded)


class ClosedRunSweep(BackgroundLoop):
    """Every ``interval`` seconds, reconciles the run documents that are not terminal.

    It also describes each open run it passes, so the history gauges
    (``metrics.history_observed``) follow the open runs' history budget.

    Args:
        interval: seconds between passes.
        batch: most documents looked at per pass (least recently updated first).
    """

    name = "closed-run sweep"

    def __init__(
        self,
        *,
        temporal: Client,
        bus: MessageBus,
        archive: RunArchive,
        interval: float,
        batch: int = 200,
        on_closed: OnClosed | None = None,
    ) -> None:
        super().__init__()
        self.temporal = temporal
        self.bus = bus
        self.archive = archive
        self.interval = interval
        self.batch = batch
        self.on_closed = on_closed

    async def run(self) -> None:
        while True:
            self.stop_if_cancelled()
            try:
                await self.sweep_once()
            except Exception as exc:  # the next pass tries again
                log.warning("closed-run sweep failed: %r", exc)
            await asyncio.sleep(self.interval)

    async def sweep_once(self) -> list[ClosedRun]:
        """One pass; returns the runs it reconciled."""
        cursor = (
            self.archive.runs.find({"status": {"$in": list(OPEN_STATUSES)}}, {"portData": 0})
            .sort([("updated_at", 1)])
            .limit(self.batch)
        )
        records = [RunRecord.from_document(doc) async for doc in cursor]
        done: list[ClosedRun] = []
        usage: list[tuple[int, int]] = []
        for record in records:
            try:
                description = await self.temporal.get_workflow_handle(record.workflow_id).describe(
                    rpc_timeout=RPC_TIMEOUT
                )
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                continue
            if description.status == WorkflowExecutionStatus.RUNNING:
                usage.append(history_usage(description))
                continue
            closed = await reconcile_closed_run(
                record.workflow_id,
                temporal=self.temporal,
                bus=self.bus,
                archive=self.archive,
                description=description,
                record=record,
                on_closed=self.on_closed,
            )
            if closed is not None:
                done.append(closed)
        metrics.history_observed(usage, HISTORY_EVENTS_LIMIT, HISTORY_BYTES_LIMIT)
        return done
