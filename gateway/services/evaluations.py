"""Evaluations for a caller: ``/evaluations`` (docs/replay-and-compare.md#evaluations).

``start_evaluation`` checks everything it can before anything starts (the limits,
the source runs, the candidate graph, the checks' expressions and scoring graphs),
resolves the candidate once (every fork runs the same spec, even if the registry
changes meanwhile), stores the evaluation with one pending entry per source run
(``spindle.shared.store.evaluations``) and starts the ``Evaluation`` workflow. The
forks take their run-start permits one by one as the workflow starts them.

An evaluation belongs to the tenant and user that started it: another tenant gets
404; cancelling takes the owner or a ``run_control_roles`` role, as runs do.
"""

from __future__ import annotations

import uuid
from typing import Any

from pymongo import DESCENDING
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.runs.temporal import TENANT_KEY
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_forks import candidate_graph
from spindle.shared.contracts.errors import Forbidden, NotFound, ValidationFailed
from spindle.shared.contracts.evaluations import (
    EVALUATION_WORKFLOW,
    EvaluationInput,
    EvaluationList,
    EvaluationRequest,
    EvaluationStarted,
    EvaluationView,
)
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.expressions import ExpressionError, compile_expression
from spindle.shared.graphs.forks import with_overrides
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.mcp_servers import check_graph_mcp_servers
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.store.evaluations import EvaluationStore, summarize
from spindle.shared.store.run_queries import RunFilter, run_filter_query

#: The graph name on an evaluation's stream metadata (what its SSE shows as the run's graph).
EVALUATION_STREAM_GRAPH = "evaluation"


def _store(caller: Caller) -> EvaluationStore:
    return EvaluationStore(caller.state.archive.database)


def _invalid(field: str, reason: str) -> ValidationFailed:
    return ValidationFailed(f"{field}: {reason}", errors=[{"field": field, "reason": reason}])


async def _listed_sources(caller: Caller, run_ids: list[str]) -> list[str]:
    """The listed runs, each once, in order; all must be the caller's tenant's."""
    ids = list(dict.fromkeys(run_ids))
    found: set[str] = set()
    cursor = caller.state.archive.runs.find(
        {"_id": {"$in": ids}, "tenant_id": caller.tenant_id}, {"_id": 1}
    )
    async for doc in cursor:
        found.add(str(doc["_id"]))
    missing = [run_id for run_id in ids if run_id not in found]
    if missing:
        shown = ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise NotFound(f"source runs not found: {shown}")
    return ids


async def _queried_sources(caller: Caller, request: EvaluationRequest, cap: int) -> list[str]:
    """The tenant's runs the query matches, newest first; forks are left out (an
    evaluation's own forks are never the sources of the next one)."""
    source = request.source
    where = RunFilter(
        tenant_id=caller.tenant_id,
        graph_name=source.graph,
        status=source.status,
        created_after=source.since,
        created_before=source.until,
    )
    query = {**run_filter_query(where), "forked_from": None}
    cursor = (
        caller.state.archive.runs.find(query, {"_id": 1})
        .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
        .limit(min(source.limit or cap, cap))
    )
    return [str(doc["_id"]) async for doc in cursor]


async def source_runs(caller: Caller, request: EvaluationRequest) -> list[str]:
    """The source runs' ids (listed or queried), within ``evaluation_max_runs``.

    Raises:
        ValidationFailed: more runs than the setting allows, or none matched.
        NotFound: a listed run is unknown or another tenant's.
    """
    cap = caller.state.settings.evaluation_max_runs
    source = request.source
    if source.run_ids is not None and len(set(source.run_ids)) > cap:
        raise _invalid("source.run_ids", f"more than {cap} runs (evaluation_max_runs)")
    if source.limit is not None and source.limit > cap:
        raise _invalid("source.limit", f"more than {cap} runs (evaluation_max_runs)")
    if source.run_ids is not None:
        ids = await _listed_sources(caller, source.run_ids)
    else:
        ids = await _queried_sources(caller, request, cap)
    if not ids:
        raise _invalid("source", "no run matches the query")
    return ids


async def _candidate(caller: Caller, request: EvaluationRequest) -> ForkRequest:
    """The fork request every run gets, its candidate resolved and validated once."""
    fork = request.fork_request()
    spec: GraphSpec | None = await candidate_graph(caller, fork)
    if spec is None:
        return fork
    settings = caller.state.settings
    validate_graph(spec, await caller.state.catalog.get(), max_node_visits=settings.max_node_visits)
    check_graph_mcp_servers(
        spec, stdio_commands=settings.mcp_stdio_commands, policy=outbound_policy(settings)
    )
    with_overrides(spec, fork)  # names every override of a node the candidate lacks
    return fork.model_copy(
        update={
            "graph": None,
            "version": None,
            "graph_spec": spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        }
    )


async def _checked(caller: Caller, request: EvaluationRequest) -> None:
    for index, check in enumerate(request.checks):
        if check.expr is not None:
            try:
                compile_expression(check.expr)
            except ExpressionError as exc:
                raise _invalid(f"checks[{index}].expr", str(exc)) from exc
        elif check.graph is not None:
            found = await caller.state.archive.get_graph(check.graph, tenant_id=caller.tenant_id)
            if found is None:
                raise _invalid(f"checks[{index}].graph", f"no graph '{check.graph}' is registered")


def _concurrency(caller: Caller, request: EvaluationRequest) -> int:
    cap = caller.state.settings.evaluation_max_concurrency
    if request.concurrency is not None and request.concurrency > cap:
        raise _invalid("concurrency", f"more than {cap} (evaluation_max_concurrency)")
    return request.concurrency or cap


async def start_evaluation(caller: Caller, request: EvaluationRequest) -> EvaluationStarted:
    """Check, store and start an evaluation (see the module docstring).

    Raises:
        ValidationFailed: a limit, the source query, the candidate or a check is invalid.
        NotFound: a listed source run or the candidate graph is unknown.
        Conflict: the candidate graph is not of the version asked for.
        Unavailable: Temporal cannot be reached.
    """
    state, settings = caller.state, caller.state.settings
    concurrency = _concurrency(caller, request)
    await _checked(caller, request)
    fork = await _candidate(caller, request)
    ids = await source_runs(caller, request)
    evaluation_id = f"eval-{uuid.uuid4().hex}"
    store = _store(caller)
    await store.create(
        evaluation_id,
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        request=request.model_dump(mode="json", exclude_none=True),
        graph=request.source.graph,
        source_ids=ids,
    )
    await state.bus.set_meta(
        evaluation_id,
        {
            "run_id": "",
            "tenant_id": caller.tenant_id,
            "user_id": caller.user_id or "",
            "graph": EVALUATION_STREAM_GRAPH,
        },
    )
    params = EvaluationInput(
        evaluation_id=evaluation_id,
        tenant_id=caller.tenant_id,
        user_id=caller.user_id,
        fork=fork,
        checks=request.checks,
        total=len(ids),
        concurrency=concurrency,
        page_size=settings.evaluation_page_size,
    )
    try:
        await state.temporal.start_workflow(
            EVALUATION_WORKFLOW,
            params,
            id=evaluation_id,
            task_queue=settings.task_queue,
            memo={"tenant": caller.tenant_id, "user": caller.user_id},
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(TENANT_KEY, caller.tenant_id)]
            ),
            static_summary=f"evaluation of {len(ids)} runs",
        )
    except RPCError as exc:
        await store.set_status(evaluation_id, "failed", f"not started: {exc}")
        raise temporal_error(exc) from exc
    base = caller.base_url
    return EvaluationStarted(
        evaluation_id=evaluation_id,
        runs=len(ids),
        status_url=f"{base}/evaluations/{evaluation_id}",
        stream_url=f"{base}/evaluations/{evaluation_id}/stream",
    )


async def _readable(caller: Caller, evaluation_id: str) -> dict[str, Any]:
    doc = await _store(caller).get(evaluation_id)
    if doc is None or doc.get("tenant_id") != caller.tenant_id:
        raise NotFound(f"evaluation '{evaluation_id}' was not found")
    return doc


async def authorize(caller: Caller, evaluation_id: str) -> None:
    """The caller may read the evaluation (its tenant's).

    Raises:
        NotFound: unknown, or another tenant's.
    """
    await _readable(caller, evaluation_id)


async def get_evaluation(
    caller: Caller, evaluation_id: str, *, offset: int = 0, limit: int | None = None
) -> EvaluationView:
    """Status, the runs' entries (a window with ``offset``/``limit``) and the summary.

    Raises:
        NotFound: unknown, or another tenant's.
    """
    doc = await _readable(caller, evaluation_id)
    store = _store(caller)
    entries = await store.entries(evaluation_id)
    window = entries[offset : None if limit is None else offset + limit]
    return EvaluationView(
        evaluation_id=evaluation_id,
        tenant_id=doc["tenant_id"],
        user_id=doc.get("user_id"),
        status=doc["status"],
        error=doc.get("error"),
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        request=doc.get("request") or {},
        summary=summarize(entries),
        runs=window,
        runs_total=len(entries),
        runs_offset=offset,
    )


async def list_evaluations(caller: Caller, *, limit: int, offset: int) -> EvaluationList:
    """The tenant's evaluations, newest first."""
    items, total = await _store(caller).list_for(caller.tenant_id, limit=limit, offset=offset)
    return EvaluationList(evaluations=items, total=total)


async def cancel_evaluation(caller: Caller, evaluation_id: str) -> None:
    """Cancel the evaluation's workflow (its running forks are cancelled with it).

    Raises:
        NotFound: unknown, or another tenant's.
        Forbidden: neither its owner nor of a ``run_control_roles`` role.
        Unavailable: Temporal cannot be reached.
    """
    doc = await _readable(caller, evaluation_id)
    identity, settings = caller.identity, caller.state.settings
    owner = doc.get("user_id")
    is_owner = owner is None or owner == identity.user_id or identity.method == "disabled"
    if not (is_owner or identity.has_any_role(settings.run_control_roles)):
        raise Forbidden(
            f"only the evaluation's owner or a user with role "
            f"{' or '.join(settings.run_control_roles)} may cancel evaluation '{evaluation_id}'"
        )
    if doc.get("status") != "running":
        return
    try:
        await caller.state.temporal.get_workflow_handle(evaluation_id).cancel()
    except RPCError as exc:
        raise temporal_error(exc) from exc
