"""Comparing two runs: ``GET /runs/{a}/compare/{b}`` (docs/replay-and-compare.md).

For two related runs the caller may read (the same graph, or a fork and its
source): per node both sides' status, output, duration, tokens, cost and tool
calls with ``same_output``; the nodes only one side executed; the final outputs
with ``same`` and a bounded structural diff; totals and their delta. The web page
``/ui/compare?a=..&b=..`` shows it side by side.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from spindle.gateway.api.deps import CallerDep
from spindle.gateway.services import run_compare
from spindle.shared.contracts.compare import RunComparison

router = APIRouter(tags=["runs"])

COMPARE_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "either run is unknown or another tenant's (problem+json)"},
    409: {"description": "the runs are of unrelated graphs, naming both (problem+json)"},
    503: {"description": "Temporal, Redis or MongoDB unavailable; retry (problem+json)"},
}


@router.get(
    "/runs/{a}/compare/{b}",
    response_model=RunComparison,
    summary="Compare two related runs: per node, only-in-one, outputs with a diff, totals",
    responses=COMPARE_RESPONSES,
)
async def compare_runs(a: str, b: str, *, caller: CallerDep) -> RunComparison:
    return await run_compare.compare(caller, a, b)
