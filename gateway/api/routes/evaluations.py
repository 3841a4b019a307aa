"""Evaluations: a candidate forked over recorded runs, compared and checked.

``POST /evaluations`` starts one (the ``Evaluation`` workflow), ``GET /evaluations``
lists the tenant's, ``GET /evaluations/{id}`` answers its status, one entry per run
and a summary, ``GET /evaluations/{id}/stream`` streams its BATCH_PROGRESS messages
over SSE, ``POST /evaluations/{id}/cancel`` cancels it and its running forks. The
routes are thin: ``services.evaluations`` checks, stores and starts
(docs/replay-and-compare.md#evaluations).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, status
from pydantic import BaseModel

from spindle.gateway.api.deps import CallerDep
from spindle.gateway.models import SSE_EVENT_SCHEMA
from spindle.gateway.services import evaluations
from spindle.gateway.services.run_streams import RunFollow, open_run_events
from spindle.gateway.streams.sse import EventStreamResponse
from spindle.shared.contracts.errors import InvalidRequest
from spindle.shared.contracts.evaluations import (
    EvaluationList,
    EvaluationRequest,
    EvaluationStarted,
    EvaluationView,
)

router = APIRouter(tags=["evaluations"])

_COMMON: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "unknown evaluation, or another tenant's (problem+json)"},
    503: {"description": "Temporal, Redis or MongoDB unavailable; retry (problem+json)"},
}


class CancelAccepted(BaseModel):
    evaluation_id: str
    status: str


@router.post(
    "/evaluations",
    status_code=status.HTTP_201_CREATED,
    response_model=EvaluationStarted,
    summary="Fork recorded runs with a candidate, compare each fork and run checks",
    responses={
        **_COMMON,
        404: {"description": "a listed source run or the candidate graph is unknown"},
        409: {"description": "the candidate graph is not of the version asked for"},
        422: {
            "description": "over evaluation_max_runs or evaluation_max_concurrency, no run "
            "matched, an invalid candidate, check expression or scoring graph (problem+json)"
        },
    },
)
async def start_evaluation(body: EvaluationRequest, *, caller: CallerDep) -> EvaluationStarted:
    return await evaluations.start_evaluation(caller, body)


@router.get(
    "/evaluations",
    response_model=EvaluationList,
    summary="The tenant's evaluations, newest first",
    responses=_COMMON,
)
async def list_evaluations(
    *,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> EvaluationList:
    return await evaluations.list_evaluations(caller, limit=limit, offset=offset)


@router.get(
    "/evaluations/{evaluation_id}",
    response_model=EvaluationView,
    summary="An evaluation's status, one entry per run, and its summary",
    responses=_COMMON,
)
async def get_evaluation(
    evaluation_id: str,
    *,
    caller: CallerDep,
    offset: Annotated[int, Query(ge=0, description="first run entry shown")] = 0,
    limit: Annotated[int | None, Query(ge=1, description="run entries shown; default: all")] = None,
) -> EvaluationView:
    return await evaluations.get_evaluation(caller, evaluation_id, offset=offset, limit=limit)


@router.post(
    "/evaluations/{evaluation_id}/cancel",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=CancelAccepted,
    summary="Cancel an evaluation and its running forks",
    responses={**_COMMON, 403: {"description": "not the owner nor of run_control_roles"}},
)
async def cancel_evaluation(evaluation_id: str, *, caller: CallerDep) -> CancelAccepted:
    await evaluations.cancel_evaluation(caller, evaluation_id)
    return CancelAccepted(evaluation_id=evaluation_id, status="cancelling")


@router.get(
    "/evaluations/{evaluation_id}/stream",
    status_code=200,
    response_class=EventStreamResponse,  # type: ignore[arg-type]
    summary="Server-sent events: the evaluation's BATCH_PROGRESS messages, then its end",
    responses={
        **_COMMON,
        200: {
            "description": "text/event-stream: one unnamed event per message, `id: <seq>` "
            "then `data: <CompactMessage JSON>`, as a run's stream",
            "content": {"text/event-stream": {"schema": SSE_EVENT_SCHEMA}},
        },
        400: {
            "description": "Last-Event-ID / after is not a sequence number, or is beyond the "
            "stream's end (problem+json)"
        },
        410: {"description": "the cursor is older than what is kept (problem+json)"},
    },
)
async def stream_evaluation(
    evaluation_id: str,
    *,
    caller: CallerDep,
    after: Annotated[str | None, Query(description="resume after this seq")] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> EventStreamResponse:
    await evaluations.authorize(caller, evaluation_id)
    cursor = last_event_id if last_event_id is not None else after
    after_seq = None
    if cursor is not None and cursor.strip():
        if not cursor.strip().isdigit():
            raise InvalidRequest("Last-Event-ID / after must be a message sequence number")
        after_seq = int(cursor.strip())
    stream = await open_run_events(
        caller, RunFollow(workflow_id=evaluation_id, after_seq=after_seq)
    )
    return EventStreamResponse(stream, drain=caller.state.stream_drain)
