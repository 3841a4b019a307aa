"""What Temporal recorded of a run, read for a caller who may read it.

``start_input`` is the ``GraphRunInput`` of the run's start event (its graph,
input, context and meta: what a fork starts from and what the run view draws);
``histories`` is every generation's event history, oldest first (the bundle);
``workstreams`` is the parent's ``workstreams`` query (the workstream routes).
The caller's right to read the run is checked before (``run_views.authorize``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from temporalio.client import WorkflowHistory, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import is_missing_handler, temporal_error
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.errors import SpindleError, Unavailable
from spindle.shared.contracts.runs import GraphRunInput
from spindle.shared.contracts.workstreams import WORKSTREAMS_QUERY, WorkstreamList
from spindle.shared.temporal.run_inputs import recorded_start_input

log = logging.getLogger(__name__)

# A query needs a live worker; without one it would block until the deadline.
QUERY_TIMEOUT = timedelta(seconds=5)


async def start_input(caller: Caller, workflow_id: str) -> GraphRunInput:
    """The run's ``GraphRunInput``, from its workflow start event.

    Raises:
        NotFound: Temporal does not know the run (or no longer keeps it).
        Conflict: the workflow is not a graph run (a workstream child, say).
        Unavailable: Temporal cannot be reached.
    """
    try:
        return await recorded_start_input(caller.state.temporal, workflow_id)
    except RPCError as exc:
        raise temporal_error(exc) from exc


async def histories(caller: Caller, workflow_id: str) -> list[WorkflowHistory]:
    """Every generation's history, oldest first: from the latest run back along the
    chain each run's start names (``continuedExecutionRunId``).

    Generations past Temporal's retention are left out (the archive still has
    their messages): a run Temporal no longer keeps has none.

    Raises:
        Unavailable: Temporal cannot be reached.
    """
    generations: list[WorkflowHistory] = []
    run_id: str | None = None
    while True:
        history = await _one_history(caller, workflow_id, run_id)
        if history is None:
            break
        generations.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            break
    generations.reverse()
    return generations


async def _one_history(
    caller: Caller, workflow_id: str, run_id: str | None
) -> WorkflowHistory | None:
    handle = caller.state.temporal.get_workflow_handle(workflow_id, run_id=run_id)
    try:
        return await handle.fetch_history()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise temporal_error(exc) from exc


async def workstreams(caller: Caller, workflow_id: str) -> WorkstreamList:
    """The parent's ``workstreams`` query (empty when Temporal no longer keeps the run).

    Raises:
        Unavailable: Temporal is down, or no worker answered in time.
    """
    handle = caller.state.temporal.get_workflow_handle(workflow_id)
    try:
        listed: WorkstreamList = await handle.query(
            WORKSTREAMS_QUERY, result_type=WorkstreamList, rpc_timeout=QUERY_TIMEOUT
        )
        return with_wall_clock_elapsed(listed, datetime.now(UTC))
    except WorkflowQueryFailedError as exc:
        if is_missing_handler(exc):  # a run from before workstreams
            return WorkstreamList()
        log.error("workstreams query of %s failed: %s", workflow_id, exc)
        raise SpindleError(f"the workstreams of run '{workflow_id}' could not be read") from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:  # known to Redis or the archive only
            return WorkstreamList()
        if exc.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise Unavailable(
                f"no worker answered for run '{workflow_id}' within "
                f"{QUERY_TIMEOUT.total_seconds():.0f}s (is a worker running?); retry",
                retry_after=5,
            ) from exc
        raise temporal_error(exc) from exc


def with_wall_clock_elapsed(listed: WorkstreamList, now: datetime) -> WorkstreamList:
    """Elapsed time and % of deadline of live workstreams as of ``now``.

    The workflow can only tell time as of its last event, which would freeze
    the figures of a quiet workstream; the gateway has a real clock.
    """
    for info in listed.workstreams:
        if info.state.finished:
            continue
        try:
            started = datetime.fromisoformat(info.started_at)
        except ValueError:
            continue
        if started.tzinfo is None:
            started = started.replace(tzinfo=UTC)
        elapsed = max((now - started).total_seconds(), info.elapsed_seconds)
        info.elapsed_seconds = round(elapsed, 3)
        info.deadline_used_pct = round(100 * elapsed / info.deadline_seconds, 1)
    return listed
