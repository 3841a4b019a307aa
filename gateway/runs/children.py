"""A run's open workstreams, cancelled by the gateway when it terminates the run.

Workstream children are started with the parent close policy ABANDON so that they
outlive a parent that continues as new (docs/graphs/long-runs.md). A terminated
parent runs no more code to stop them, so the terminate route asks the run for its
workstreams first and cancels the open ones after the terminate. When the query goes
unanswered (a busy worker, or none), Temporal's visibility lists them instead: the
running workflows whose ``ParentWorkflowId`` is the run's (every generation's
children carry the run's workflow id as their parent's). Visibility needs no worker;
it is eventually consistent, so a child started in the last moment before the
terminate may be missing from it, and is left to its deadline.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio.client import Client
from temporalio.exceptions import TemporalError

from spindle.shared.contracts.workstreams import WORKSTREAMS_QUERY, WorkstreamList

log = logging.getLogger(__name__)

QUERY_TIMEOUT = timedelta(seconds=3)
CANCEL_TIMEOUT = timedelta(seconds=5)


async def open_children(temporal: Client, workflow_id: str) -> list[str] | None:
    """The workflow ids of the run's workstreams that have not ended; None if unknown.

    A closed run answers too (its worker replays it), so a caller that got None
    before a terminate can ask again after it.
    """
    try:
        listed = await temporal.get_workflow_handle(workflow_id).query(
            WORKSTREAMS_QUERY, result_type=WorkstreamList, rpc_timeout=QUERY_TIMEOUT
        )
    except TemporalError as exc:
        log.info("workstreams of %s: query unanswered (%s); asking visibility", workflow_id, exc)
        return await running_children(temporal, workflow_id)
    return [w.child_workflow_id for w in listed.workstreams if not w.state.finished]


async def running_children(temporal: Client, workflow_id: str) -> list[str] | None:
    """The running child workflows of ``workflow_id`` by visibility; None if unknown."""
    escaped = workflow_id.replace("\\", "\\\\").replace("'", "\\'")
    query = f"ParentWorkflowId = '{escaped}' AND ExecutionStatus = 'Running'"
    try:
        return [
            execution.id
            async for execution in temporal.list_workflows(query, rpc_timeout=QUERY_TIMEOUT)
        ]
    except TemporalError as exc:
        log.warning("workstreams of %s unknown for now (%s)", workflow_id, exc)
        return None


async def cancel_children(temporal: Client, child_ids: list[str] | None) -> None:
    """Request cancellation of each child (a child already closed is skipped)."""
    for child_id in child_ids or []:
        try:
            await temporal.get_workflow_handle(child_id).cancel(rpc_timeout=CANCEL_TIMEOUT)
        except TemporalError as exc:
            log.info("workstream %s not cancelled: %s", child_id, exc)
