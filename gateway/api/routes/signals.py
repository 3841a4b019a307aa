"""Signals to a run (seed 002's ``POST …/signal/{name}``).

``UserInput`` is delivered as the Temporal Update of the same name through the
service layer (``spindle.gateway.services.run_input``, which says what each
refusal looks like).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from spindle.gateway.api.deps import CallerDep, ControllableRunDep, FileStoreDep, ReadableRunDep
from spindle.gateway.services import run_input
from spindle.gateway.services.run_input import RunSignal
from spindle.shared.contracts.runs import CompleteAck, FileUploaded, SignalAck, UserInput

router = APIRouter(tags=["signals"])

SIGNAL_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {
        "description": "the caller may not answer: not an assignee (or assigned role) of an "
        "assigned prompt, nor the run's owner for another; run-control roles always may"
    },
    404: {"description": "unknown run or signal name (problem+json)"},
    409: {
        "description": "the prompt expired (title 'Prompt expired') or was answered already "
        "(title 'Prompt already answered'), the run is not waiting for input, or has "
        "finished; the run is unchanged (problem+json)"
    },
    422: {"description": "the answer does not satisfy the prompt's schema (problem+json)"},
    429: {"description": "the tenant sends signals too fast; retry after Retry-After"},
    503: {"description": "Temporal unavailable or no worker answered in time (problem+json)"},
}


@router.post(
    "/runs/{workflow_id}/{run_id}/signal/FileUploaded",
    response_model=SignalAck,
    summary="Tell the run of a file in its files (the listening agent hears of it)",
    responses=SIGNAL_RESPONSES,
)
async def signal_file_uploaded(
    workflow_id: str,
    run_id: str,
    body: FileUploaded,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    store: FileStoreDep,
) -> SignalAck:
    stored = await store.get(tenant_id=run.tenant_id, workflow_id=workflow_id, name=body.name)
    upload = FileUploaded(
        name=stored.name,
        content_type=stored.content_type,
        size=stored.size,
        path=stored.name,
        uploaded_by=caller.identity.user_id,
    )
    await run_input.file_uploaded(caller, workflow_id, upload)
    return SignalAck(status="accepted", message=f"file '{stored.name}' announced")


@router.post(
    "/runs/{workflow_id}/complete",
    response_model=CompleteAck,
    summary="End the listening interactive agent (COMPLETE); the graph goes on",
    responses={
        **SIGNAL_RESPONSES,
        409: {"description": "no interactive agent is listening, or the run has finished"},
    },
)
async def complete_agent(
    workflow_id: str, *, run: ControllableRunDep, caller: CallerDep
) -> CompleteAck:
    return await run_input.complete_agent(caller, workflow_id)


@router.post(
    "/runs/{workflow_id}/{run_id}/signal/{name}",
    response_model=SignalAck,
    summary="Send a signal (UserInput: a message or a HITL answer)",
    responses=SIGNAL_RESPONSES,
)
async def signal_run(
    workflow_id: str,
    run_id: str,
    name: str,
    *,
    run: ReadableRunDep,
    caller: CallerDep,
    body: Annotated[UserInput | None, Body()] = None,
) -> SignalAck:
    signal = RunSignal(workflow_id=workflow_id, name=name, input=body)
    return await run_input.signal_run(caller, signal, owner=run)


@router.post(
    "/runs/{workflow_id}/signal/{name}",
    response_model=SignalAck,
    summary="Send a signal to the run's current execution",
    responses=SIGNAL_RESPONSES,
)
async def signal_workflow(
    workflow_id: str,
    name: str,
    *,
    run: ReadableRunDep,
    caller: CallerDep,
    body: Annotated[UserInput | None, Body()] = None,
) -> SignalAck:
    signal = RunSignal(workflow_id=workflow_id, name=name, input=body)
    return await run_input.signal_run(caller, signal, owner=run)
