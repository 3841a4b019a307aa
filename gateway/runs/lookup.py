"""Finding a run and describing it from Temporal, the workflow and the archive.

A run is known when any of its three homes knows it: its message stream in
Redis, its document in MongoDB, or its workflow in Temporal. Describe combines
them: Temporal says whether it is open, the running workflow's ``describe``
query says what it is doing, the archive keeps the rest after it closed.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.exceptions import TemporalError

from spindle.gateway.models import HistoryBudget, RunDetail
from spindle.gateway.runs.temporal import (
    GRAPH_KEY,
    TENANT_KEY,
    describe_workflow,
    is_open,
    run_status_of,
    temporal_ui_url,
)
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.budgets import BudgetState
from spindle.shared.contracts.errors import Conflict, NotFound, SpindleError
from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.run_end import EndedBy
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GraphRunResult,
    NodeReport,
    PendingInput,
    RunDescription,
    RunStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.temporal.closed_runs import (
    HISTORY_BYTES_LIMIT,
    HISTORY_EVENTS_LIMIT,
    TERMINAL_STATUSES,
    OnClosed,
    history_usage,
    needs_reconcile,
    reconcile_closed_run,
)

log = logging.getLogger(__name__)

# A query needs a live worker; when none is polling it would block until the
# deadline, so keep it short and fall back to the archive.
QUERY_TIMEOUT = timedelta(seconds=3)


def not_found(workflow_id: str) -> NotFound:
    return NotFound(f"run '{workflow_id}' was not found")


async def archived_run(archive: RunArchive, workflow_id: str) -> RunRecord | None:
    """The run's archive document; None when absent or the archive is down."""
    try:
        return await archive.get_run(workflow_id)
    except Exception as exc:
        log.warning("archive lookup of %s failed: %s", workflow_id, exc)
        return None


async def describe_run(
    workflow_id: str,
    *,
    temporal: Client,
    archive: RunArchive,
    settings: Settings,
    base_url: str,
    bus: MessageBus | None = None,
    on_closed: OnClosed | None = None,
) -> RunDetail:
    """Everything known about one run.

    With ``bus``, a run Temporal closed without Spindle (terminate from the
    Temporal UI, a limit, a timeout) is reconciled first: its stream gets the
    closing message and its document the reason (``reconcile_closed_run``).

    Raises:
        NotFound: neither Temporal nor the archive knows it.
    """
    description = await describe_workflow(temporal, workflow_id)
    record = await archived_run(archive, workflow_id)
    if description is None and record is None:
        raise not_found(workflow_id)
    if bus is not None and description is not None and not is_open(description):
        record = await _reconciled(
            workflow_id, temporal, bus, archive, description, record, on_closed
        )

    live: RunDescription | None = None
    if description is not None and is_open(description):
        live = await _query_live_state(temporal, workflow_id, description.run_id)

    # Generation 1's run id: the one the start answered, which keys the stream and the
    # archive of every generation (a later generation's own run id would not).
    run_id = _first_run_id(description) or (record.run_id if record else None)
    detail = RunDetail(workflow_id=workflow_id, run_id=run_id, status="running")
    if record is not None:
        _apply_record(detail, record)
    if description is not None:
        _apply_temporal(detail, description)
    if live is not None:
        _apply_live(detail, live)
    else:
        detail.node_reports = await _archived_reports(archive, workflow_id)
        if record is not None and record.budget is not None:
            # The budget as the run ended (finish_run keeps it: docs/graphs/budgets.md).
            detail.budget = BudgetState.model_validate(record.budget)
    _apply_facts(detail, live, record)
    if (
        description is not None
        and not is_open(description)
        and (record is None or record.output is None or record.node_counts is None)
    ):
        # Closed while the archive is down or behind: Temporal kept the result.
        await _fill_from_result(detail, temporal, workflow_id)
    if detail.status not in TERMINAL_STATUSES:
        # The workflow keeps the latest output node's output as it goes; until the run
        # ends that is an earlier node's output, not the run's (docs/api/index.md).
        detail.output = None
    if detail.status in TERMINAL_STATUSES and detail.status != "completed" and not detail.error:
        # finish_run records no reason for a cancel; until Temporal's reason is
        # reconciled in (once the execution has closed), say at least what happened.
        detail.error = f"the run was {detail.status}"
    if run_id:
        detail.temporal_ui_url = temporal_ui_url(settings, workflow_id)
        detail.stream_url = f"{base_url}/runs/{workflow_id}/{run_id}/stream"
        detail.updates_url = f"{base_url}/runs/{workflow_id}/{run_id}/updates"
    return detail


def _apply_record(detail: RunDetail, record: RunRecord) -> None:
    """What the run's document says (the archive's view)."""
    detail.graph_name = record.graph_name
    detail.tenant_id = record.tenant_id
    detail.status = str(record.status)
    detail.current_nodes = list(record.current_nodes or [])
    detail.pending_input = (
        PendingInput.model_validate(record.pending_input) if record.pending_input else None
    )
    detail.input = record.input
    detail.context = record.context
    detail.output = record.output
    detail.error = record.error
    detail.ended_by = EndedBy.model_validate(record.ended_by) if record.ended_by else None
    detail.created_at = record.created_at
    detail.updated_at = record.updated_at
    if record.forked_from is not None:
        detail.forked_from = ReplaySource.model_validate(record.forked_from)


def _apply_live(detail: RunDetail, live: RunDescription) -> None:
    """What the open workflow's describe query says (newer than the document)."""
    detail.status = str(live.status)
    detail.graph_name = detail.graph_name or live.graph_name
    detail.current_nodes = list(live.current_nodes)
    detail.pending_input = live.pending_input
    detail.node_reports = list(live.node_reports)
    detail.output = live.output if live.output is not None else detail.output
    detail.error = live.error or detail.error
    detail.budget = live.budget
    detail.deadline_at = live.deadline_at
    detail.awaiting_message = list(live.awaiting_message)


async def _reconciled(  # noqa: PLR0917 (private; every argument is needed)
    workflow_id: str,
    temporal: Client,
    bus: MessageBus,
    archive: RunArchive,
    description: WorkflowExecutionDescription,
    record: RunRecord | None,
    on_closed: OnClosed | None,
) -> RunRecord | None:
    """The run document after reconciling a closed run (the same one if nothing changed)."""
    if record is not None and not needs_reconcile(record):
        return record
    try:
        closed = await reconcile_closed_run(
            workflow_id,
            temporal=temporal,
            bus=bus,
            archive=archive,
            description=description,
            record=record,
            on_closed=on_closed,
        )
    except Exception as exc:
        # Describe still answers (from Temporal); the sweep tries again later.
        log.warning("reconciling closed run %s failed: %r", workflow_id, exc)
        return record
    if closed is None:
        return record
    fresh = await archived_run(archive, workflow_id)
    if fresh is not None and not fresh.error:
        fresh.error = closed.reason  # archive write lagging or refused: say why anyway
    return fresh


def history_budget(description: WorkflowExecutionDescription) -> HistoryBudget:
    """The execution's history usage against Temporal's default limits."""
    events, size = history_usage(description)
    used = max(events / HISTORY_EVENTS_LIMIT, size / HISTORY_BYTES_LIMIT)
    return HistoryBudget(
        events=events,
        bytes=size,
        events_limit=HISTORY_EVENTS_LIMIT,
        bytes_limit=HISTORY_BYTES_LIMIT,
        used=round(used, 6),
    )


def _apply_temporal(detail: RunDetail, description: WorkflowExecutionDescription) -> None:
    detail.temporal_status = description.status.name if description.status else None
    detail.history = history_budget(description)
    detail.created_at = detail.created_at or description.start_time
    detail.closed_at = description.close_time
    attributes = description.typed_search_attributes
    detail.graph_name = detail.graph_name or attributes.get(GRAPH_KEY)
    detail.tenant_id = detail.tenant_id or attributes.get(TENANT_KEY)
    if not is_open(description):
        # Temporal is the truth about how a run ended (e.g. a terminate from the
        # Temporal UI never reaches the archive).
        status = run_status_of(description)
        # A run stopped at its deadline fails in Temporal; the archive knows it timed out.
        if not (status is RunStatus.FAILED and detail.status == RunStatus.TIMED_OUT.value):
            detail.status = str(status)
        detail.current_nodes = []
        detail.pending_input = None


async def _fill_from_result(detail: RunDetail, temporal: Client, workflow_id: str) -> None:
    """A completed run's output and node reports from its Temporal result."""
    if detail.status != RunStatus.COMPLETED.value:
        return
    try:
        result = await temporal.get_workflow_handle(workflow_id, result_type=GraphRunResult).result(
            rpc_timeout=QUERY_TIMEOUT
        )
    except Exception as exc:  # an offloaded result needs MongoDB; say what we have
        log.info("result of %s unavailable (%r); describing without it", workflow_id, exc)
        return
    detail.output = detail.output if detail.output is not None else result.output
    detail.node_reports = detail.node_reports or list(result.node_reports)
    if detail.node_counts is None:
        detail.node_counts = dict(result.report_counts)
    if detail.history is not None and detail.history.generations is None:
        detail.history.generations = result.generation
    detail.budget = detail.budget or result.budget


def _apply_facts(detail: RunDetail, live: RunDescription | None, record: RunRecord | None) -> None:
    """``node_counts`` and ``history.generations``: the running workflow's, else what
    ``finish_run`` kept on the run's document (docs/graphs/long-runs.md#after-the-end)."""
    counts = live.report_counts if live is not None else None
    generations = live.generation if live is not None else None
    if record is not None:
        counts = counts if counts is not None else record.node_counts
        generations = generations if generations is not None else record.generations
    detail.node_counts = dict(counts) if counts is not None else None
    if detail.history is not None:
        detail.history.generations = generations
    elif generations is not None:  # Temporal no longer has the run; the archive says
        detail.history = HistoryBudget(
            events=None,
            bytes=None,
            events_limit=HISTORY_EVENTS_LIMIT,
            bytes_limit=HISTORY_BYTES_LIMIT,
            used=None,
            generations=generations,
        )


def _first_run_id(description: WorkflowExecutionDescription | None) -> str | None:
    if description is None:
        return None
    first = description.raw_description.workflow_execution_info.first_run_id
    return first or description.run_id


async def _query_live_state(
    temporal: Client, workflow_id: str, described_run_id: str | None
) -> RunDescription | None:
    """The run's ``describe`` query; asked again, once, of the latest run when the run
    it reached was just continuing as new (docs/graphs/long-runs.md)."""
    handle = temporal.get_workflow_handle(workflow_id)
    try:
        state: RunDescription = await handle.query(
            DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=QUERY_TIMEOUT
        )
        return state
    except TemporalError as exc:
        failure = exc
    latest = await _handed_over(temporal, workflow_id, described_run_id)
    if latest is not None:
        try:
            again: RunDescription = await temporal.get_workflow_handle(
                workflow_id, run_id=latest
            ).query(DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=QUERY_TIMEOUT)
            return again
        except TemporalError as exc:
            failure = exc
    log.info("describe query of %s unavailable (%s); using the archive", workflow_id, failure)
    return None


async def _handed_over(
    temporal: Client, workflow_id: str, described_run_id: str | None
) -> str | None:
    """The latest run's id if the run continued as new since it was described, else None."""
    try:
        latest = await describe_workflow(temporal, workflow_id)
    except SpindleError:
        return None
    if latest is None or not is_open(latest) or latest.run_id == described_run_id:
        return None
    return latest.run_id


async def _archived_reports(archive: RunArchive, workflow_id: str) -> list[NodeReport]:
    try:
        reports: list[Any] = list(await archive.node_reports(workflow_id))
    except Exception as exc:
        log.warning("archive node reports of %s failed: %s", workflow_id, exc)
        return []
    return [r if isinstance(r, NodeReport) else NodeReport.model_validate(r) for r in reports]


async def closed_or_unknown(
    temporal: Client, archive: RunArchive, workflow_id: str
) -> SpindleError:
    """Why a run refused an update: it has finished (409) or nobody knows it (404)."""
    description = await describe_workflow(temporal, workflow_id)
    if description is not None and not is_open(description):
        return Conflict(
            f"run '{workflow_id}' has already finished ({run_status_of(description).value})"
        )
    if description is None and await archived_run(archive, workflow_id) is not None:
        return Conflict(f"run '{workflow_id}' has already finished")
    return not_found(workflow_id)
