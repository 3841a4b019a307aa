"""Stopping a run for a caller: cancel (the run cleans up) or terminate (at once).

``cancel_run`` and ``terminate_run`` refuse a run that has already finished
(409) or is unknown (404), as ``POST /runs/{id}/cancel`` and ``…/terminate``
answer; ``request_cancel`` only asks Temporal, for doors with their own answer
to a finished run (A2A ``tasks/cancel``, JSON-RPC ``tasks.cancel``).

Each notes first who ends the run (``shared.store.run_ends``), so the run's
``error``, ``ended_by`` and webhook name the user. A run queued on a busy
conversation has no execution yet: its cancel asks the conversation to drop it
from the queue (it never starts; docs/conversations.md, "Queued runs and cancel").
"""

from __future__ import annotations

import contextlib
import logging

from pydantic import BaseModel, ConfigDict, Field
from temporalio.service import RPCError

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.runs.children import cancel_children, open_children
from spindle.gateway.runs.conversations import cancel_queued
from spindle.gateway.runs.lookup import archived_run, not_found
from spindle.gateway.runs.task_runs import settle_terminated_run
from spindle.gateway.runs.temporal import RPC_TIMEOUT, describe_workflow, is_open, run_status_of
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.conversations import CancelQueuedRun, ConversationRunState
from spindle.shared.contracts.errors import Conflict
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.contracts.run_end import EndedBy, EndedByKind
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.store.prompts import PromptStore
from spindle.shared.store.run_ends import RunEnds
from spindle.shared.tasks.webhooks import Webhooks

log = logging.getLogger(__name__)


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


def _by_caller(caller: Caller, stop: RunStop) -> EndedBy:
    return EndedBy(kind=EndedByKind.USER, id=caller.user_id, reason=stop.reason or None)


async def request_cancel(
    caller: Caller, workflow_id: str, *, closed_ok: bool = False, reason: str | None = None
) -> None:
    """Ask Temporal to cancel the run; the run posts TERMINATED and ends.

    Args:
        closed_ok: a run already closed (or unknown) is no error.
        reason: why (the run's error names the caller and this).

    Raises:
        SpindleError: Temporal refused (translated by ``temporal_error``).
    """
    ended_by = _by_caller(caller, RunStop(workflow_id=workflow_id, reason=reason))
    ends = RunEnds(caller.state.bus.redis)
    noted = await ends.note(workflow_id, ended_by)
    handle = caller.state.temporal.get_workflow_handle(workflow_id)
    told = ended_by.sentence("canceled")
    if closed_ok:
        # Already closed: what is left to settle is the caller's own.
        with contextlib.suppress(RPCError):
            await handle.cancel(reason=told, rpc_timeout=RPC_TIMEOUT)
        return
    try:
        await handle.cancel(reason=told, rpc_timeout=RPC_TIMEOUT)
    except RPCError as exc:
        if noted:  # not cancelled after all: a later stop names its own caller
            await ends.forget(workflow_id)
        raise temporal_error(exc) from exc


async def cancel_run(caller: Caller, stop: RunStop) -> None:
    """Cancel a running run (``POST /runs/{id}/cancel``), or a queued one: it leaves
    its conversation's queue and never starts.

    Raises:
        NotFound: unknown run. Conflict: the run has already finished.
    """
    if await _cancel_queued(caller, stop):
        return
    await _open_run_or_raise(caller, stop.workflow_id)
    await request_cancel(caller, stop.workflow_id, reason=stop.reason)
    reason = stop.reason or None
    log.info("cancel requested for %s%s", stop.workflow_id, f": {reason}" if reason else "")


async def _cancel_queued(caller: Caller, stop: RunStop) -> bool:
    """Drop a run queued on a busy conversation; False if it is not queued (any more).

    The conversation decides (``cancel_queued_run``), so a run that started
    meanwhile is cancelled as a run instead.
    """
    state, workflow_id = caller.state, stop.workflow_id
    try:
        meta = await state.bus.get_meta(workflow_id)
    except Exception as exc:  # Redis down: no queued run is found, the run path answers
        log.warning("stream metadata of %s unavailable: %s", workflow_id, exc)
        return False
    conversation_id = meta.get("conversation_id")
    if not conversation_id:
        return False
    record = await archived_run(state.archive, workflow_id)
    if record is None or record.status != RunStatus.QUEUED.value:
        return False
    found = await cancel_queued(
        state.temporal,
        tenant_id=record.tenant_id,
        conversation_id=conversation_id,
        cancel=CancelQueuedRun(workflow_id=workflow_id, by=caller.user_id, reason=stop.reason),
    )
    if found.state != ConversationRunState.CANCELED:
        return False
    ended_by = _by_caller(caller, stop).model_copy(update={"how": "canceled before it started"})
    await _settle_ended(
        caller, workflow_id, RunStatus.CANCELED, ended_by, dedup=f"{workflow_id}:queued-cancel"
    )
    log.info("queued run %s cancelled by %s: it will not start", workflow_id, caller.user_id)
    return True


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
    ended_by = _by_caller(caller, stop)
    reason = ended_by.sentence("terminated")
    state = caller.state
    temporal = state.temporal
    ends = RunEnds(state.bus.redis)
    noted = await ends.note(workflow_id, ended_by)
    children = await open_children(temporal, workflow_id)  # ABANDON: they outlive it
    try:
        await temporal.get_workflow_handle(workflow_id).terminate(
            reason=reason, rpc_timeout=RPC_TIMEOUT
        )
    except RPCError as exc:
        if noted:
            await ends.forget(workflow_id)
        raise temporal_error(exc) from exc
    if children is None:  # unanswered while it ran: ask the closed run
        children = await open_children(temporal, workflow_id)
    await cancel_children(temporal, children)
    await _settle_terminated(caller, workflow_id, ended_by, tenant_id)


async def _settle_ended(
    caller: Caller, workflow_id: str, status: RunStatus, ended_by: EndedBy, *, dedup: str
) -> str:
    """End what a run that runs no more code cannot end itself: its stream
    (TERMINATED, once per ``dedup``), document, prompts and webhook; best-effort.

    Returns:
        The reason in a sentence (the run's ``error``).
    """
    state = caller.state
    reason = ended_by.sentence(status.value)
    said = ended_by.model_dump(mode="json", exclude_none=True)
    message = create_compact_message(
        AgentMessageType.TERMINATED, reason, details={"status": status.value, "ended_by": said}
    )
    try:
        await state.bus.post(workflow_id, message, dedup_key=dedup)
    except Exception as exc:
        log.error("run %s %s but TERMINATED was not posted: %s", workflow_id, status, exc)
    record = None
    try:
        await state.archive.update_run(
            workflow_id,
            status=status.value,
            error=reason,
            ended_by=ended_by.model_dump(mode="json"),
            current_nodes=[],
        )
        await PromptStore(state.archive.database).close_run(workflow_id)
        record = await archived_run(state.archive, workflow_id)
    except Exception as exc:
        log.error("run %s %s but the archive was not updated: %s", workflow_id, status, exc)
    data = {
        "run_id": record.run_id if record is not None else None,
        "graph": record.graph_name if record is not None else None,
        "status": status.value,
        "error": reason,
        "ended_by": said,
    }
    try:
        await Webhooks(state.bus.redis).notify(workflow_id, status.value, data, occurrence=dedup)
    except Exception as exc:
        log.error("run %s %s but its webhook was not queued: %s", workflow_id, status, exc)
    return reason


async def _settle_terminated(
    caller: Caller, workflow_id: str, ended_by: EndedBy, tenant_id: str
) -> None:
    """A terminated workflow runs no more code, so the gateway ends its conversation
    itself (dedup key: a repeated terminate posts nothing new), best-effort."""
    state = caller.state
    reason = await _settle_ended(
        caller, workflow_id, RunStatus.TERMINATED, ended_by, dedup=f"{workflow_id}:terminate"
    )
    try:
        # A task run's documents: the terminated workflow cannot settle them itself.
        await settle_terminated_run(state.tasks, state.bus.redis, tenant_id, workflow_id, reason)
    except Exception as exc:
        log.error("run %s terminated but its tasks were not updated: %s", workflow_id, exc)
