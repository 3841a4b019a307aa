"""Runs: start, list, describe, cancel, terminate, raise the budget."""

from __future__ import annotations

import logging
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Request, Response, status
from pydantic import BaseModel, Field
from temporalio.service import RPCError

from spindle.gateway.api.deps import (
    ArchiveDep,
    BaseUrlDep,
    BusDep,
    CatalogDep,
    ControllableRunDep,
    IdentityDep,
    LimitsDep,
    ReadableRunDep,
    SettingsDep,
    TemporalDep,
    TenantDep,
)
from spindle.gateway.api.models import (
    Accepted,
    RunDetail,
    RunList,
    StartRunRequest,
    StartRunResponse,
)
from spindle.gateway.protocols.jsonrpc.task_execution import settle_terminated_run
from spindle.gateway.runs.children import cancel_children, open_children
from spindle.gateway.runs.lookup import archived_run, describe_run, not_found
from spindle.gateway.runs.starter import admit_run_start, start_run
from spindle.gateway.runs.temporal import RPC_TIMEOUT, describe_workflow, is_open, run_status_of
from spindle.gateway.runs.temporal_errors import is_missing_handler, temporal_error
from spindle.gateway.runs.updates import execute_run_update
from spindle.shared.contracts.budgets import RAISE_BUDGET_UPDATE, BudgetAck, BudgetRaise
from spindle.shared.contracts.errors import (
    BudgetRefused,
    Conflict,
    SpindleError,
    from_application_error,
)
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.contracts.runs import RunStatus

log = logging.getLogger(__name__)

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
    temporal: TemporalDep,
    archive: ArchiveDep,
    bus: BusDep,
    catalog: CatalogDep,
    settings: SettingsDep,
    identity: IdentityDep,
    limits: LimitsDep,
    base_url: BaseUrlDep,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            max_length=200,
            description="a retried POST with the same key returns the same run",
        ),
    ] = None,
) -> StartRunResponse:
    permit = await admit_run_start(limits, identity.tenant_id)
    started, is_new = await start_run(
        body,
        permit=permit,
        tenant_id=identity.tenant_id,
        user_id=identity.user_id,
        idempotency_key=idempotency_key,
        temporal=temporal,
        archive=archive,
        bus=bus,
        catalog=catalog,
        settings=settings,
        base_url=base_url,
    )
    response.headers["Location"] = started.status_url
    if not is_new:
        response.headers["Idempotent-Replayed"] = "true"
    return started


@router.get("/runs", response_model=RunList, summary="List runs, newest first")
async def list_runs(
    *,
    archive: ArchiveDep,
    tenant: TenantDep,
    status_filter: Annotated[RunStatus | None, Query(alias="status")] = None,
    graph: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> RunList:
    records, total = await archive.list_runs(
        tenant_id=tenant,
        status=status_filter.value if status_filter else None,
        graph_name=graph,
        limit=limit,
        offset=offset,
    )
    return RunList(runs=records, total=total, limit=limit, offset=offset)


@router.get(
    "/runs/{workflow_id}",
    response_model=RunDetail,
    summary="Describe a run: status, current nodes, pending input, node reports",
    responses=PROBLEMS,
)
async def get_run(
    workflow_id: str,
    request: Request,
    *,
    run: ReadableRunDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    bus: BusDep,
    settings: SettingsDep,
    base_url: BaseUrlDep,
) -> RunDetail:
    # A run Temporal closed without Spindle is reconciled here, so that what
    # this answers (status, error) is also what the stream and document say.
    return await describe_run(
        workflow_id,
        temporal=temporal,
        archive=archive,
        settings=settings,
        base_url=base_url,
        bus=bus,
        on_closed=getattr(request.app.state, "on_run_closed", None),
    )


async def _open_run_or_raise(temporal: TemporalDep, archive: ArchiveDep, workflow_id: str) -> None:
    description = await describe_workflow(temporal, workflow_id)
    if description is None:
        if await archived_run(archive, workflow_id) is None:
            raise not_found(workflow_id)
        raise Conflict(f"run '{workflow_id}' has already finished")
    if not is_open(description):
        raise Conflict(
            f"run '{workflow_id}' has already finished ({run_status_of(description).value})"
        )


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
    temporal: TemporalDep,
    archive: ArchiveDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    await _open_run_or_raise(temporal, archive, workflow_id)
    try:
        await temporal.get_workflow_handle(workflow_id).cancel(rpc_timeout=RPC_TIMEOUT)
    except RPCError as exc:
        raise temporal_error(exc) from exc
    reason = body.reason if body and body.reason else None
    log.info("cancel requested for %s%s", workflow_id, f": {reason}" if reason else "")
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
    request: Request,
    *,
    run: ControllableRunDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    bus: BusDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    await _open_run_or_raise(temporal, archive, workflow_id)
    reason = (body.reason if body else None) or "terminated through the gateway"
    handle = temporal.get_workflow_handle(workflow_id)
    children = await open_children(temporal, workflow_id)  # ABANDON: they outlive it
    try:
        await handle.terminate(reason=reason, rpc_timeout=RPC_TIMEOUT)
    except RPCError as exc:
        raise temporal_error(exc) from exc
    if children is None:  # unanswered while it ran: ask the closed run
        children = await open_children(temporal, workflow_id)
    await cancel_children(temporal, children)
    # A terminated workflow runs no more code, so the gateway ends its
    # conversation itself (dedup key: a repeated terminate posts nothing new).
    message = create_compact_message(
        AgentMessageType.TERMINATED, reason, details={"status": RunStatus.TERMINATED.value}
    )
    try:
        await bus.post(workflow_id, message, dedup_key=f"{workflow_id}:terminate")
    except Exception as exc:
        log.error("run %s terminated but TERMINATED was not posted: %s", workflow_id, exc)
    try:
        await archive.update_run(
            workflow_id, status=RunStatus.TERMINATED.value, error=reason, current_nodes=[]
        )
    except Exception as exc:
        log.error("run %s terminated but the archive was not updated: %s", workflow_id, exc)
    try:
        # A task run's documents: the terminated workflow cannot settle them itself.
        await settle_terminated_run(request.app.state, run.tenant_id, workflow_id, reason)
    except Exception as exc:
        log.error("run %s terminated but its tasks were not updated: %s", workflow_id, exc)
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
    workflow_id: str,
    body: BudgetRaise,
    *,
    run: ControllableRunDep,
    identity: IdentityDep,
    limits: LimitsDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
) -> BudgetAck:
    await limits.check_signal(identity.tenant_id)
    return await execute_run_update(
        temporal,
        archive,
        workflow_id=workflow_id,
        name=RAISE_BUDGET_UPDATE,
        argument=body,
        result_type=BudgetAck,
        update_id=f"budget-{uuid.uuid4().hex}",
        refused=lambda cause: _budget_refusal(workflow_id, cause),
    )


def _budget_refusal(workflow_id: str, cause: BaseException) -> SpindleError:
    error = from_application_error(cause)
    if isinstance(error, BudgetRefused):
        return error
    if is_missing_handler(cause):
        return Conflict(f"run '{workflow_id}' was started before budgets existed")
    log.error("budget raise of %s failed: %r", workflow_id, cause)
    return SpindleError(f"the run could not take the budget raise: {cause}")


# The same operations addressed by (workflowId, runId), as @vertesia/client's
# WorkflowsApi calls them; served at the root and under its /api/v1/workflows prefix.
by_run_router = APIRouter(tags=["runs"])


@by_run_router.get("/runs/{workflow_id}/{run_id}", response_model=RunDetail, responses=PROBLEMS)
async def get_run_by_run_id(
    workflow_id: str,
    run_id: str,
    request: Request,
    *,
    run: ReadableRunDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    bus: BusDep,
    settings: SettingsDep,
    base_url: BaseUrlDep,
) -> RunDetail:
    return await get_run(
        workflow_id,
        request,
        run=run,
        temporal=temporal,
        archive=archive,
        bus=bus,
        settings=settings,
        base_url=base_url,
    )


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
    temporal: TemporalDep,
    archive: ArchiveDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    return await cancel_run(workflow_id, run=run, temporal=temporal, archive=archive, body=body)


@by_run_router.post(
    "/runs/{workflow_id}/{run_id}/terminate",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=Accepted,
    responses={**PROBLEMS, 409: {"description": "the run has already finished"}},
)
async def terminate_run_by_run_id(
    workflow_id: str,
    run_id: str,
    request: Request,
    *,
    run: ControllableRunDep,
    temporal: TemporalDep,
    archive: ArchiveDep,
    bus: BusDep,
    body: Annotated[CancelRequest | None, Body()] = None,
) -> Accepted:
    return await terminate_run(
        workflow_id, request, run=run, temporal=temporal, archive=archive, bus=bus, body=body
    )
