"""Forking a run: ``POST /runs/{workflow_id}/fork`` starts a new run from a recorded one.

The fork starts from the source's recorded start (graph, input, context, meta),
optionally with a candidate graph (``graph`` / ``graph_spec``), node ``overrides``
and ``state`` edits; the nodes before ``from_node`` that the fork leaves unchanged
complete from the source's recorded outputs without an activity. The fork's
``forked_from`` (``GET /runs/{id}``) says where it came from. The route is thin:
``services.run_forks`` fetches and checks, ``shared.graphs.forks`` builds
(docs/replay-and-compare.md).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, status

from spindle.gateway.api.deps import CallerDep, ControllableRunDep
from spindle.gateway.models import StartRunResponse
from spindle.gateway.services import run_forks
from spindle.shared.contracts.forks import ForkRequest

router = APIRouter(tags=["runs"])

FORK_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {"description": "may see the run but not control it (problem+json)"},
    404: {"description": "unknown run or candidate graph (problem+json)"},
    409: {
        "description": "the source is not a graph run, has no recorded node outputs to "
        "reuse, or the candidate graph is not of the version asked for (problem+json)"
    },
    422: {
        "description": "from_node, an override's node or a state key names no node; the "
        "candidate graph or the input is invalid; each fault named (problem+json)"
    },
    429: {"description": "over the tenant's run-start limit; Retry-After (problem+json)"},
    503: {"description": "Temporal or MongoDB unavailable; retry (problem+json)"},
}


@router.post(
    "/runs/{workflow_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=StartRunResponse,
    summary="Start a new run from this run's record: a candidate graph, overrides, reuse",
    responses=FORK_RESPONSES,
)
async def fork_run(
    run: ControllableRunDep,
    *,
    caller: CallerDep,
    body: Annotated[ForkRequest | None, Body()] = None,
) -> StartRunResponse:
    # No body (or {}): a whole live replay of the source with its own graph.
    return await run_forks.fork_run(caller, run.workflow_id, body or ForkRequest())
