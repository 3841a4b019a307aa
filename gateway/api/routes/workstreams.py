"""Workstreams of a run (seed 002, docs/design.md §5): launch, list, steer, message,
terminate, extend the deadline.

A workstream is a child run its parent launches without waiting; it posts to
the parent's stream with its own ``w`` (workstream id). The gateway never talks
to a child: every call goes to the parent ``GraphRun`` as a Temporal update
(launch, steer, message, terminate: ``services.run_input.update_run``) or its
``workstreams`` query (list: ``services.run_records.workstreams``), so the
parent's validators decide and the caller learns at once whether it was taken.

Failures the parent reports (classes of ``spindle.shared.contracts.errors``,
through ``from_application_error``) become problems: an unknown launch id is a 404, a
finished (or non-interactive) workstream a 409, an invalid steer a 422. A
finished or finishing run is a 409, and no worker or no Temporal a 503 with
Retry-After.

The list is the parent's query, which Temporal answers for an open run and,
while a worker is up, for a closed one too (it replays the run's history).
Once Temporal no longer keeps the run (past the namespace's retention), or for
a run started before workstreams existed, the list is empty: the messages the
workstreams posted stay in the run's history (``/updates``) and archive.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, status

from spindle.gateway.api.deps import CallerDep, ControllableRunDep, ReadableRunDep
from spindle.gateway.http.temporal_errors import is_missing_handler
from spindle.gateway.services import run_input, run_records
from spindle.gateway.services.run_input import update_run
from spindle.shared.contracts.budgets import (
    EXTEND_WORKSTREAM_DEADLINE_UPDATE,
    DeadlineAck,
    DeadlineExtension,
    ExtendWorkstreamDeadline,
)
from spindle.shared.contracts.errors import (
    BudgetRefused,
    Conflict,
    DeadlineRefused,
    InvalidSteer,
    NotFound,
    RunFinishing,
    SpindleError,
    UnknownWorkstream,
    WorkstreamFinished,
    WorkstreamNotInteractive,
    WorkstreamStartFailed,
    from_application_error,
)
from spindle.shared.contracts.workstreams import (
    LAUNCH_WORKSTREAM_UPDATE,
    STEER_WORKSTREAM_UPDATE,
    TERMINATE_WORKSTREAM_UPDATE,
    LaunchAck,
    LaunchRequest,
    SteerAck,
    SteerRequest,
    SteerWorkstream,
    TerminateAck,
    TerminateWorkstream,
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
)

log = logging.getLogger(__name__)

router = APIRouter(tags=["workstreams"])

LaunchId = Annotated[
    str, Path(min_length=1, max_length=200, description="the workstream's launch id (ws-<n>)")
]

_COMMON: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "unknown run or workstream, or another tenant's (problem+json)"},
    503: {"description": "Temporal unavailable or no worker answered in time (problem+json)"},
}
_CONTROL: dict[int | str, dict[str, Any]] = {
    **_COMMON,
    403: {"description": "only the run's owner or a run-control role may do this"},
    429: {"description": "the tenant sends signals too fast; retry after Retry-After"},
}
LAUNCH_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_CONTROL,
    409: {"description": "the run has finished (problem+json)"},
    422: {"description": "invalid task or deadline (30..1800 s), naming the field"},
}
STEER_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_CONTROL,
    409: {"description": "the workstream or the run has finished (problem+json)"},
    422: {"description": "unknown steer command, or text missing for it (problem+json)"},
}
MESSAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_CONTROL,
    409: {"description": "the workstream is not interactive, or has finished (problem+json)"},
}
DEADLINE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_CONTROL,
    409: {
        "description": "past the run's own deadline, an interactive or finished workstream, "
        "or a finished run (problem+json)"
    },
    422: {"description": "extend_seconds not in 1..1800, naming the field"},
}
TERMINATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_CONTROL,
    409: {"description": "the workstream or the run has finished (problem+json)"},
}


@router.post(
    "/runs/{workflow_id}/workstreams",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=LaunchAck,
    summary="Launch a workstream (a child run); answers its launch_id at once",
    responses=LAUNCH_RESPONSES,
)
async def launch_workstream(
    workflow_id: str,
    body: LaunchRequest,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description="a retried launch with the same key returns the same workstream",
        ),
    ] = None,
) -> LaunchAck:
    update_id = f"launch-{idempotency_key}" if idempotency_key else f"launch-{uuid.uuid4().hex}"
    return await update_run(
        caller,
        workflow_id,
        name=LAUNCH_WORKSTREAM_UPDATE,
        argument=body,
        result_type=LaunchAck,
        update_id=update_id,
        refused=_refusal(workflow_id, LAUNCH_WORKSTREAM_UPDATE, None),
    )


@router.get(
    "/runs/{workflow_id}/workstreams",
    response_model=WorkstreamList,
    summary="The run's workstreams: state, phase, iteration, % of deadline used",
    responses=_COMMON,
)
async def list_workstreams(
    workflow_id: str, *, run: ReadableRunDep, caller: CallerDep
) -> WorkstreamList:
    return await run_records.workstreams(caller, workflow_id)


@router.get(
    "/runs/{workflow_id}/workstreams/{launch_id}",
    response_model=WorkstreamInfo,
    summary="One workstream of the run",
    responses=_COMMON,
)
async def get_workstream(
    workflow_id: str, launch_id: LaunchId, *, run: ReadableRunDep, caller: CallerDep
) -> WorkstreamInfo:
    listed = await run_records.workstreams(caller, workflow_id)
    for info in listed.workstreams:
        if info.launch_id == launch_id:
            return info
    raise unknown_workstream(workflow_id, launch_id)


@router.post(
    "/runs/{workflow_id}/workstreams/{launch_id}/steer",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SteerAck,
    summary="Steer a running workstream (add_instruction, set_priority, add_constraint, "
    "pause_requested, resume_requested); it acknowledges on the stream",
    responses=STEER_RESPONSES,
)
async def steer_workstream(
    workflow_id: str,
    launch_id: LaunchId,
    body: SteerRequest,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
) -> SteerAck:
    return await update_run(
        caller,
        workflow_id,
        name=STEER_WORKSTREAM_UPDATE,
        argument=SteerWorkstream(launch_id=launch_id, steer=body),
        result_type=SteerAck,
        update_id=f"steer-{uuid.uuid4().hex}",
        refused=_refusal(workflow_id, STEER_WORKSTREAM_UPDATE, launch_id),
    )


@router.post(
    "/runs/{workflow_id}/workstreams/{launch_id}/messages",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=WorkstreamMessageAck,
    summary="Send a follow-up message to an interactive workstream",
    responses=MESSAGE_RESPONSES,
)
async def message_workstream(
    workflow_id: str,
    launch_id: LaunchId,
    body: WorkstreamMessageRequest,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
) -> WorkstreamMessageAck:
    # One mechanism with a UserInput naming the workstream (docs/conversations.md).
    return await run_input.message_workstream(caller, workflow_id, launch_id, body)


@router.post(
    "/runs/{workflow_id}/workstreams/{launch_id}/terminate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=TerminateAck,
    summary="Terminate a workstream (graceful stop; its state becomes canceled)",
    responses=TERMINATE_RESPONSES,
)
async def terminate_workstream(
    workflow_id: str,
    launch_id: LaunchId,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
) -> TerminateAck:
    return await update_run(
        caller,
        workflow_id,
        name=TERMINATE_WORKSTREAM_UPDATE,
        argument=TerminateWorkstream(launch_id=launch_id),
        result_type=TerminateAck,
        update_id=f"terminate-{uuid.uuid4().hex}",
        refused=_refusal(workflow_id, TERMINATE_WORKSTREAM_UPDATE, launch_id),
    )


@router.post(
    "/runs/{workflow_id}/workstreams/{launch_id}/deadline",
    response_model=DeadlineAck,
    summary="Extend a workstream's deadline, within the run's own deadline",
    responses=DEADLINE_RESPONSES,
)
async def extend_workstream_deadline(
    workflow_id: str,
    launch_id: LaunchId,
    body: DeadlineExtension,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
) -> DeadlineAck:
    return await update_run(
        caller,
        workflow_id,
        name=EXTEND_WORKSTREAM_DEADLINE_UPDATE,
        argument=ExtendWorkstreamDeadline(launch_id=launch_id, extension=body),
        result_type=DeadlineAck,
        update_id=f"deadline-{uuid.uuid4().hex}",
        refused=_refusal(workflow_id, EXTEND_WORKSTREAM_DEADLINE_UPDATE, launch_id),
    )


def unknown_workstream(workflow_id: str, launch_id: str) -> NotFound:
    return NotFound(f"workstream '{launch_id}' was not found in run '{workflow_id}'")


def _refusal(
    workflow_id: str, name: str, launch_id: str | None
) -> Callable[[BaseException], SpindleError]:
    return lambda cause: _update_failure(workflow_id, name, launch_id, cause)


def _update_failure(
    workflow_id: str, name: str, launch_id: str | None, cause: BaseException
) -> SpindleError:
    """The problem for an update the parent refused (the error it raised)."""
    error = from_application_error(cause)
    if isinstance(error, UnknownWorkstream):
        return unknown_workstream(workflow_id, launch_id or "?")
    if isinstance(error, RunFinishing):
        return RunFinishing(f"run '{workflow_id}' is finishing: it launches no more workstreams")
    if isinstance(
        error,
        WorkstreamFinished
        | WorkstreamNotInteractive
        | InvalidSteer
        | WorkstreamStartFailed
        | DeadlineRefused
        | BudgetRefused,
    ):
        return error
    if type(error) is Conflict:  # e.g. an interactive workstream has no deadline
        return error
    if is_missing_handler(cause):
        return Conflict(f"run '{workflow_id}' does not support workstreams")
    log.error("%s update of %s failed: %r", name, workflow_id, cause)
    return SpindleError(f"the run could not take {name}: {cause}")
