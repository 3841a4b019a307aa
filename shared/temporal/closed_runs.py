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
  document that already says how the run ended is not overwritten, and the
  run's ``budget`` as it last recorded it (``last_budget``), which no
  ``finish_run`` wrote (docs/graphs/budgets.md, "After the end");
* closes the run's open prompts, so they leave every inbox (``/inbox``).

Callers: ``GET /runs/{id}`` (the gateway), the SSE stream's keep-alive tick,
and ``ClosedRunSweep``, a background loop over the non-terminal run documents
and the runs with open prompts, so that nobody has to be watching. Runs are
always addressed by workflow id: a run that continued as new is the same run.
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
from temporalio.exceptions import TemporalError
from temporalio.service import RPCError, RPCStatusCode

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.contracts.run_end import EndedBy, EndedByKind
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    ENDED_STATUSES,
    RunDescription,
    RunStatus,
)
from spindle.shared.platform import metrics
from spindle.shared.platform.background_loop import BackgroundLoop
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.store.prompts import PromptStore
from spindle.shared.store.run_ends import RunEnds

log = logging.getLogger(__name__)

RPC_TIMEOUT = timedelta(seconds=5)
TERMINAL_STATUSES = ENDED_STATUSES
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

OnClosed = Callable[[RunRecord | None, RunStatus, str, EndedBy], Awaitable[None]]
# The verb of a status in "<verb> by <who>" (EndedBy.sentence).
VERBS = {
    RunStatus.TERMINATED: "terminated",
    RunStatus.CANCELED: "canceled",
    RunStatus.TIMED_OUT: "timed out",
    RunStatus.FAILED: "failed",
}


@dataclass(frozen=True)
class ClosedRun:
    """What ``reconcile_closed_run`` found and did."""

    workflow_id: str
    status: RunStatus
    reason: str
    ended_by: EndedBy
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
    reason, _ = await close_account(temporal, description)
    return reason


def public_identity(identity: str) -> str:
    """A Temporal client identity as users may see it: no process id, no host name.

    The SDKs name a client ``<pid>@<host>`` (a Spindle worker or gateway: "Spindle")
    and the CLI ``temporal-cli:<user>@<host>`` (kept without the host), so a run's
    error never shows where Spindle runs (docs/operations/threat-model.md).
    """
    who, at, _host = identity.partition("@")
    if not at:
        return identity
    return "Spindle" if who.isdigit() else who


def _operator(identity: str, reason: str | None) -> EndedBy:
    shown = public_identity(identity)[:300]
    return EndedBy(kind=EndedByKind.OPERATOR, id=shown or None, reason=reason or None)


async def cancel_request(temporal: Client, workflow_id: str, run_id: str | None) -> EndedBy | None:
    """Who asked Temporal to cancel the execution, and why (its cancel request event).

    Raises:
        RPCError: the history cannot be read.
    """
    handle = temporal.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events(rpc_timeout=RPC_TIMEOUT):
        if event.HasField("workflow_execution_cancel_requested_event_attributes"):
            req = event.workflow_execution_cancel_requested_event_attributes
            return _operator(req.identity, req.cause)
    return None


async def close_account(
    temporal: Client, description: WorkflowExecutionDescription
) -> tuple[str, EndedBy]:
    """Why Temporal closed the execution (a sentence) and who or what closed it."""
    status = description.status
    wid, rid = description.id, description.run_id
    try:
        if status == WorkflowExecutionStatus.CANCELED:
            # The reason and who asked are on the request, not on the close event.
            asked = await cancel_request(temporal, wid, rid)
            if asked is None:
                return "canceled through Temporal", _operator("", None)
            who = f" by {asked.id}" if asked.id else ""
            why = f": {asked.reason}" if asked.reason else ""
            return f"canceled through Temporal{who}{why}", asked
        events = await _events(temporal, wid, rid, close_only=True)
    except RPCError as exc:
        log.warning("close event of %s unavailable: %s", wid, exc)
        events = []
    last = events[-1] if events else None
    if status == WorkflowExecutionStatus.TERMINATED:
        if last is not None and last.HasField("workflow_execution_terminated_event_attributes"):
            term = last.workflow_execution_terminated_event_attributes
            who = f" by {public_identity(term.identity)}" if term.identity else ""
            text = f"terminated through Temporal{who}: {term.reason or 'no reason given'}"
            return text, _operator(term.identity, term.reason)
        return "terminated through Temporal", _operator("", None)
    if status == WorkflowExecutionStatus.TIMED_OUT:
        return _timed_out(description), EndedBy(kind=EndedByKind.DEADLINE)
    if last is not None and last.HasField("workflow_execution_failed_event_attributes"):
        failure = last.workflow_execution_failed_event_attributes.failure
        return failure.message or "the run failed", EndedBy(kind=EndedByKind.LIMIT)
    ended = f"the run ended in Temporal as {status.name if status else 'unknown'}"
    return ended, EndedBy(kind=EndedByKind.LIMIT)


def _timed_out(description: WorkflowExecutionDescription) -> str:
    config = description.raw_description.execution_config
    if config.HasField("workflow_execution_timeout"):
        limit = _seconds(config.workflow_execution_timeout)
        return f"timed out: the run exceeded {limit} execution timeout"
    if config.HasField("workflow_run_timeout"):
        limit = _seconds(config.workflow_run_timeout)
        return f"timed out: the run exceeded {limit} run timeout"
    return "timed out: the run exceeded its execution timeout"


def needs_reconcile(record: RunRecord | None) -> bool:
    """A document that does not (yet) say how a closed run ended, or why."""
    if record is None:
        return True
    if record.status not in TERMINAL_STATUSES:
        return True
    return record.status != RunStatus.COMPLETED.value and not record.error


def closed_run_data(
    record: RunRecord, status: RunStatus, reason: str, ended_by: EndedBy
) -> dict[str, Any]:
    """The webhook ``data`` of a run closed without its ``finish_run``
    (docs/protocols/outbound.md)."""
    return {
        "run_id": record.run_id,
        "graph": record.graph_name,
        "status": status.value,
        "error": reason,
        "ended_by": ended_by.model_dump(mode="json", exclude_none=True),
    }


async def _post_closing(
    bus: MessageBus, workflow_id: str, status: RunStatus, reason: str, ended_by: EndedBy
) -> bool:
    """The closing messages ``finish_run`` would have posted; True if stored now."""
    details = {
        "status": status.value,
        "error": reason,
        "closed_by": "temporal",
        "ended_by": ended_by.model_dump(mode="json", exclude_none=True),
    }
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


async def last_budget(
    temporal: Client, description: WorkflowExecutionDescription
) -> dict[str, Any] | None:
    """The budget a closed run last recorded, as a document value (``paused`` false:
    it has ended); None without a budget, or when no worker answers.

    Its ``describe`` query, which Temporal answers for a closed execution by having
    a worker replay its history: the figures the run had counted when it was
    closed, a terminate included (docs/graphs/budgets.md, "After the end").
    """
    handle = temporal.get_workflow_handle(description.id, run_id=description.run_id)
    try:
        state = await handle.query(
            DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=RPC_TIMEOUT
        )
    except (RPCError, TemporalError) as exc:
        log.info("budget of closed run %s unavailable: %r", description.id, exc)
        return None
    if state.budget is None:
        return None
    ended: dict[str, Any] = state.budget.model_copy(update={"paused": False}).model_dump(
        mode="json"
    )
    return ended


async def _record_close(  # noqa: PLR0917 (private; every argument is needed)
    archive: RunArchive,
    record: RunRecord,
    status: RunStatus,
    reason: str,
    ended_by: EndedBy,
    budget: dict[str, Any] | None = None,
) -> bool:
    """Write status and error unless the document already says how the run ended
    (and the run's last budget, when the document has none)."""
    if record.status in TERMINAL_STATUSES:
        # finish_run wrote the status (a cancel it handled) but no reason: add one.
        query: dict[str, Any] = {"_id": record.workflow_id, "status": record.status, "error": None}
        update: dict[str, Any] = {"error": reason, "ended_by": ended_by.model_dump(mode="json")}
    else:
        query = {"_id": record.workflow_id, "status": {"$in": list(OPEN_STATUSES)}}
        update = {
            "status": status.value,
            "error": reason,
            "ended_by": ended_by.model_dump(mode="json"),
            "current_nodes": [],
            "currentNodeId": None,
            "pending_input": None,
            "pendingInput": None,
        }
    if budget is not None and record.budget is None:
        update["budget"] = budget
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
    reason, ended_by = await close_account(temporal, description)
    noted = await RunEnds(bus.redis).read(workflow_id)
    if noted is not None:  # the gateway or a conversation said who ends it
        ended_by, reason = noted, noted.sentence(VERBS[status])
    posted = (
        await _post_closing(bus, workflow_id, status, reason, ended_by) if stream_open else False
    )
    recorded = False
    if archive is not None and record is not None and needs_reconcile(record):
        budget = await last_budget(temporal, description) if record.budget is None else None
        recorded = await _record_close(archive, record, status, reason, ended_by, budget)
    if archive is not None and (posted or recorded):
        # No finish_run closed its prompts: out of every inbox now.
        await PromptStore(archive.database).close_run(workflow_id)
    if posted:
        log.warning("run %s was closed by Temporal (%s): %s", workflow_id, status.value, reason)
        metrics.run_closed_outside(status.value)
        if on_closed is not None:
            await on_closed(record, status, reason, ended_by)
    return ClosedRun(workflow_id, status, reason, ended_by, posted=posted, recorded=recorded)


class ClosedRunSweep(BackgroundLoop):
    """Every ``interval`` seconds, reconciles the run documents that are not terminal,
    then closes the open prompts of runs that Temporal reports closed.

    It also describes each open run it passes, so the history gauges
    (``metrics.history_observed``) follow the open runs' history budget. The
    prompt pass (``close_prompts_once``) covers runs whose document already says
    how they ended but whose prompts stayed in the inbox (a gateway that went
    down before it closed them, documents reconciled before prompts were closed).

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
        self._prompts_after: str | None = None

    async def run(self) -> None:
        while True:
            self.stop_if_cancelled()
            try:
                await self.sweep_once()
            except Exception as exc:  # the next pass tries again
                log.warning("closed-run sweep failed: %r", exc)
            await asyncio.sleep(self.interval)

    async def sweep_once(self) -> list[ClosedRun]:
        """One pass over run documents, then one over open prompts; returns the runs
        it reconciled."""
        done = await self._documents_once()
        await self.close_prompts_once()
        return done

    async def close_prompts_once(self) -> list[str]:
        """Close the open prompts of runs that are no longer running in Temporal.

        At most ``batch`` runs are described per pass; past that, the next pass goes
        on where this one stopped.

        Returns:
            The workflow ids whose prompts were closed.
        """
        store = PromptStore(self.archive.database)
        closed: list[str] = []
        looked = 0
        after = self._prompts_after
        while looked < self.batch:
            ids = await store.runs_with_open_prompts(after=after, limit=self.batch - looked)
            if not ids:
                after = None  # the end: the next pass starts over
                break
            for workflow_id in ids:
                looked += 1
                if await self._close_prompts_of(store, workflow_id):
                    closed.append(workflow_id)
            after = ids[-1]
        self._prompts_after = after
        return closed

    async def _close_prompts_of(self, store: PromptStore, workflow_id: str) -> bool:
        try:
            description = await self.temporal.get_workflow_handle(workflow_id).describe(
                rpc_timeout=RPC_TIMEOUT
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            description = None  # past retention, or never a run: nothing will answer
        if description is not None and description.status == WorkflowExecutionStatus.RUNNING:
            return False
        if description is not None:
            # Stream, document and webhook first, as for any run closed from outside.
            await reconcile_closed_run(
                workflow_id,
                temporal=self.temporal,
                bus=self.bus,
                archive=self.archive,
                description=description,
                on_closed=self.on_closed,
            )
        count = await store.close_run(workflow_id)
        if count:
            log.warning("run %s is closed: its %d open prompt(s) closed", workflow_id, count)
        return count > 0

    async def _documents_once(self) -> list[ClosedRun]:
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
