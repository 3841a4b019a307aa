"""Stopping a run for a caller: cancel (the run cleans up) or terminate (at once).

``cancel_run`` and ``terminate_run`` refuse a run that has already finished
(409) or is unknown (404), as ``POST /runs/{id}/cancel`` and ``…/terminate``
answer; ``request_cancel`` only asks Temporal, for doors with their own answer
to a finished run (A2A ``tasks/cancel``, JSON-RPC ``tasks.cancel``).
"""

from __future__ import annotations

import contextlib
import logging

from pydantic import BaseModel, ConfigDict, Field
from temporalio.service import RPCError

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.runs.children import cancel_children, open_children
from spindle.gateway.runs.lookup import archived_run, not_found
from spindle.gateway.runs.task_runs import settle_terminated_run
from spindle.gateway.runs.temporal import RPC_TIMEOUT, describe_workflow, is_open, run_status_of
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.errors import Conflict
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.contracts.runs import RunStatus

log = logging.getLogger(__name__)

TERMINATED_BY_GATEWAY = "terminated through the gateway"


class RunStop(BaseModel):
    """Which run to stop, and why (kept in the logs, or as the run's error)."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str = Field(min_length=1)
    reason: str | None = Field(None, max_length=1000)


async def is_run_open(caller: Caller, workflow_id: str) -> bool:
    """Whether Temporal knows the run and it still runs.

    Raises:
        Unavailable: Temporal cannot be reached.
    """
    description = await describe_workflow(caller.state.temporal, workflow_id)
    return description is not None and is_open(description)


async def _open_run_or_raise(caller: Caller, workflow_id: str) -> None:
    state = caller.state
    description = await describe_workflow(state.temporal, workflow_id)
    if description is None:
        if await archived_run(state.archive, workflow_id) is None:
            raise not_found(workflow_id)
        raise Conflict(f"run '{workflow_id}' has already finished")
    if not is_open(description):
        raise Conflict(
            f"run '{workflow_id}' has already finished ({run_status_of(description).value})"
        )


async def request_cancel(caller: Caller, workflow_id: str, *, closed_ok: bool = False) -> None:
    """Ask Temporal to cancel the run; the run posts TERMINATED and ends.

    Args:
        closed_ok: a run already closed (or unknown) is no error.

    Raises:
        SpindleError: Temporal refused (translated by ``temporal_error``).
    """
    handle = caller.state.temporal.get_workflow_handle(workflow_id)
    if closed_ok:
        # Already closed: what is left to settle is the caller's own.
        with contextlib.suppress(RPCError):
            await handle.cancel(rpc_timeout=RPC_TIMEOUT)
        return
    try:
        await handle.cancel(rpc_timeout=RPC_TIMEOUT)
    except RPCError as exc:
        raise temporal_error(exc) from exc


async def cancel_run(caller: Caller, stop: RunStop) -> None:
    """Cancel a running run (``POST /runs/{id}/cancel``).

    Raises:
        NotFound: unknown run. Conflict: the run has already finished.
    """
    await _open_run_or_raise(caller, stop.workflow_id)
    await request_cancel(caller, stop.workflow_id)
    reason = stop.reason or None
    log.info("cancel requested for %s%s", stop.workflow_id, f": {reason}" if reason else "")


async def terminate_run(caller: Caller, stop: RunStop, *, tenant_id: str) -> None:
    """Terminate a running run at once; the gateway ends what the run no longer can:
    its open workstreams, its TERMINATED message, its document and its tasks.

    Args:
        tenant_id: the run's tenant (its owner's, from the access check).

    Raises:
        NotFound: unknown run. Conflict: the run has already finished.
    """
    workflow_id = stop.workflow_id
    await _open_run_or_raise(caller, workflow_id)
    reason = stop.reason or TERMINATED_BY_GATEWAY
    state = caller.state
    temporal = state.temporal
    children = await open_children(temporal, workflow_id)  # ABANDON: they outlive it
    try:
        await temporal.get_workflow_handle(workflow_id).terminate(
            reason=reason, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        raise temporal_error(exc) from exc
    if children is None:  # unanswered while it ran: ask the closed run
        children = await open_children(temporal, workflow_id)
    await cancel_children(temporal, children)
    await _settle_terminated(caller, workflow_id, reason, tenant_id)


async def _settle_terminated(caller: Caller, workflow_id: str, reason: str, tenant_id: str) -> None:
    """A terminated workflow runs no more code, so the gateway ends its conversation
    itself (dedup key: a repeated terminate posts nothing new), best-effort."""
    state = caller.state
    message = create_compact_message(
        AgentMessageType.TERMINATED, reason, details={"status": RunStatus.TERMINATED.value}
    )
    try:
        await state.bus.post(workflow_id, message, dedup_key=f"{workflow_id}:terminate")
    except Exception as exc:
        log.error("run %s terminated but TERMINATED was not posted: %s", workflow_id, exc)
    try:
        await state.archive.update_run(
            workflow_id, status=RunStatus.TERMINATED.value, error=reason, current_nodes=[]
        )
    except Exception as exc:
        log.error("run %s terminated but the archive was not updated: %s", workflow_id, exc)
    try:
        # A task run's documents: the terminated workflow cannot settle them itself.
        await settle_terminated_run(state.tasks, state.bus.redis, tenant_id, workflow_id, reason)
    except Exception as exc:
        log.error("run %s terminated but its tasks were not updated: %s", workflow_id, exc)
