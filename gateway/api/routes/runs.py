"""Runs: start, list, describe, cancel, terminate, raise the budget."""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Response, status
from pydantic import AwareDatetime, BaseModel, BeforeValidator, Field

from spindle.gateway.api.deps import (
    ArchiveDep,
    CallerDep,
    ControllableRunDep,
    ReadableRunDep,
    TenantDep,
)
from spindle.gateway.models import (
    Accepted,
    RunDetail,
    RunList,
    StartRunRequest,
    StartRunResponse,
)
from spindle.gateway.services import run_control, run_input
from spindle.gateway.services.run_control import RunStop
from spindle.gateway.services.run_starts import start_run
from spindle.gateway.services.run_views import RunLookup, describe_run
from spindle.shared.contracts.budgets import BudgetAck, BudgetRaise
from spindle.shared.contracts.conversations import CONVERSATION_ID_PATTERN
from spindle.shared.contracts.errors import ValidationFailed
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.store.run_queries import MAX_ID_SEARCH, RunFilter

_ISO_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def _iso_date_time(value: Any) -> Any:
    """Only ISO 8601 text: pydantic would also read ``0.5`` as seconds since 1970."""
    if isinstance(value, str) and not _ISO_DATE_TIME.match(value):
        raise ValueError("an ISO 8601 date-time with offset, e.g. 2026-11-29T12:00:00Z")
    return value


IsoDateTime = Annotated[AwareDatetime, BeforeValidator(_iso_date_time)]


router = APIRouter(tags=["runs"])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: {"description": "malformed request (problem+json)"},
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {"description": "may see the run but not control it (problem+json)"},
    404: {"description": "unknown run or graph (problem+json)"},
    422: {"description": "invalid graph, parameters or input, naming the field (problem+json)"},
    503: {"description": "Temporal, Redis or MongoDB unavailable; retry (problem+json)"},
}


class CancelRequest(BaseModel):
    reason: str | None = Field(None, max_length=1000)


@router.post(
    "/runs",
    status_code=status.HTTP_201_CREATED,
    response_model=StartRunResponse,
    summary="Validate a graph and its input, then start a run",
    responses=PROBLEMS,
)
async def create_run(
    body: StartRunRequest,
    *,
    response: Response,
    caller: CallerDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description=(
                "a retried POST with the same key returns the same run; keys are the "
                "caller's own (another user's same key starts another run)"
            ),
        ),
    ] = None,
) -> StartRunResponse:
    started, is_new = await start_run(caller, body, idempotency_key=idempotency_key)
    response.headers["Location"] = started.status_url
    if not is_new:
        response.headers["Idempotent-Replayed"] = "true"
    return started


@router.get(
    "/runs",
    response_model=RunList,
    summary="List runs, newest first; filter by status, graph, id, conversation, time",
    responses={422: PROBLEMS[422]},
)
async def list_runs(
    *,
    archive: ArchiveDep,
    tenant: TenantDep,
    status_filter: Annotated[RunStatus | None, Query(alias="status")] = None,
    graph: Annotated[str | None, Query(max_length=128, description="exact graph name")] = None,
    search: Annotated[
        str | None,
        Query(
            alias="id",
            min_length=1,
            max_length=MAX_ID_SEARCH,
            description="runs whose workflow id contains this text (any case)",
        ),
    ] = None,
    conversation: Annotated[
        str | None,
        Query(
            pattern=CONVERSATION_ID_PATTERN,
            description="runs of this conversation (the conversation_id they were started with)",
        ),
    ] = None,
    forked_from: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_ID_SEARCH,
            description="forks of this run (workflow id; docs/replay-and-compare.md)",
        ),
    ] = None,
    created_after: Annotated[
        IsoDateTime | None,
        Query(description="runs created at or after this time (ISO 8601 with offset)"),
    ] = None,
    created_before: Annotated[
        IsoDateTime | None,
        Query(description="runs created before this time (ISO 8601 with offset)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> RunList:
    if created_after and created_before and created_after >= created_before:
        problem = "created_after must be before created_before"
        raise ValidationFailed(
            problem,
            errors=[{"in": "query", "field": "created_after", "rule": "order", "message": problem}],
        )
    where = RunFilter(
        tenant_id=tenant,
        status=status_filter.value if status_filter else None,
        graph_name=graph,
        id_contains=search,
        conversation_id=conversation,
        forked_from=forked_from,
        created_after=created_after,
        created_before=created_before,
    )
    records, total = await archive.list_runs(where=where, limit=limit, offset=offset)
    return RunList(runs=records, total=total, limit=limit, offset=offset)


@router.get(
    "/runs/{workflow_id}",
    response_model=RunDetail,
    summary="Describe a run: status, current nodes, pending input, node reports",
    responses=PROBLEMS,
)
async def get_run(workflow_id: str, *, run: ReadableRunDep, caller: CallerDep) -> RunDetail:
    # A run Temporal closed without Spindle is reconciled here, so that what
    # this answers (status, error) is also what the stream and document say.
    return await describe_run(caller, RunLookup(workflow_id=workflow_id, reconcile=True))


@router.post(
    "/runs/{workflow_id}/cancel",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    summary="Request cancellation; the run posts TERMINATED and ends",
    responses={**PROBLEMS, 409: {"description": "the run has already finished"}},
)
async def cancel_run(
    workflow_id: str,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    reason = body.reason if body and body.reason else None
    await run_control.cancel_run(caller, RunStop(workflow_id=workflow_id, reason=reason))
    return Accepted(message="cancellation requested", workflow_id=workflow_id)


@router.post(
    "/runs/{workflow_id}/terminate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    summary="Terminate at once (no clean-up in the run); posts TERMINATED for it",
    responses={**PROBLEMS, 409: {"description": "the run has already finished"}},
)
async def terminate_run(
    workflow_id: str,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    stop = RunStop(workflow_id=workflow_id, reason=body.reason if body else None)
    await run_control.terminate_run(caller, stop, tenant_id=run.tenant_id)
    return Accepted(message="run terminated", workflow_id=workflow_id)


@router.post(
    "/runs/{workflow_id}/budget",
    response_model=BudgetAck,
    summary="Raise the run's budget caps; a run paused at a cap resumes",
    responses={
        **PROBLEMS,
        409: {"description": "a cap below what the run has spent, or the run has finished"},
        422: {"description": "a cap that is not a positive number, naming the field"},
    },
)
async def raise_budget(
    workflow_id: str, body: BudgetRaise, *, run: ControllableRunDep, caller: CallerDep
) -> BudgetAck:
    return await run_input.raise_budget(caller, workflow_id, body)


# The same operations addressed by (workflowId, runId), as @vertesia/client's
# WorkflowsApi calls them; served at the root and under its /api/v1/workflows prefix.
by_run_router = APIRouter(tags=["runs"])


@by_run_router.get("/runs/{workflow_id}/{run_id}", response_model=RunDetail, responses=PROBLEMS)
async def get_run_by_run_id(
    workflow_id: str, run_id: str, *, run: ReadableRunDep, caller: CallerDep
) -> RunDetail:
    return await get_run(workflow_id, run=run, caller=caller)


@by_run_router.post(
    "/runs/{workflow_id}/{run_id}/cancel",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    responses={**PROBLEMS, 409: {"description": "the run has already finished"}},
)
async def cancel_run_by_run_id(
    workflow_id: str,
    run_id: str,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    return await cancel_run(workflow_id, run=run, caller=caller, body=body)


@by_run_router.post(
    "/runs/{workflow_id}/{run_id}/terminate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    responses={**PROBLEMS, 409: {"description": "the run has already finished"}},
)
async def terminate_run_by_run_id(
    workflow_id: str,
    run_id: str,
    *,
    run: ControllableRunDep,
    caller: CallerDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    return await terminate_run(workflow_id, run=run, caller=caller, body=body)
