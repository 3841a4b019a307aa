"""Read routes behind the web page's run view: a run's graph and one node's executions.

``GET /runs/{workflow_id}/graph`` answers the graph the run executes (from its
workflow start event in Temporal, so inline specs and forks show too; from the
registry once Temporal no longer keeps the history). ``GET
/runs/{workflow_id}/nodes/{node_id}`` answers what the node inspector shows
(seed 001 §5's debug sidebar): each execution of the node with the NodeMessage
envelope it received and the one it produced, and the items that failed in it.
Live status comes from ``GET /runs/{workflow_id}`` (node reports, current
nodes); ``GET /runs/{workflow_id}/usage`` answers tokens, cost and LLM time per
node and workstream and the maps' item counts (``services.run_usage``).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from spindle.gateway.api.deps import ArchiveDep, BusDep, CallerDep, ReadableRunDep, SettingsDep
from spindle.gateway.runs.lookup import archived_run
from spindle.gateway.services.run_records import start_input
from spindle.gateway.services.run_usage import RunUsage, run_usage
from spindle.shared.contracts.errors import Conflict, NotFound
from spindle.shared.contracts.graph_spec import GraphSpec

log = logging.getLogger(__name__)

router = APIRouter(tags=["runs"])

# Failed items listed per execution; the envelope has them all.
MAX_FAILED_ITEMS = 100

VIEW_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    404: {"description": "unknown run or node (problem+json)"},
    503: {"description": "Temporal or MongoDB unavailable; retry (problem+json)"},
}


class RunGraph(BaseModel):
    """The graph a run executes."""

    workflow_id: str
    graph: GraphSpec


class NodeExecutionView(BaseModel):
    """One execution of a node: its report and its envelopes before and after."""

    visit: int = 1
    attempt: int = 1
    node_type: str | None = None
    status: str
    started_at: str | None = None
    duration_ms: float = 0.0
    error: str | None = None
    output_summary: str | None = None
    input: Any = Field(None, description="the NodeMessage envelope the node received")
    output: Any = Field(None, description="the NodeMessage envelope the node produced")
    failed_items: list[Any] = Field(
        default_factory=list, description="items of the output that carry an error"
    )
    state_updates: dict[str, Any] | None = Field(
        None, description="the node's writes to shared state: {set, merge, delete}"
    )
    context_updates: dict[str, Any] | None = Field(
        None, description="the node's writes to the run's context: {set, merge, delete}"
    )
    launch_id: str | None = Field(
        None, description="a workstream node: the launch id of the workstream it started"
    )


class NodeInspection(BaseModel):
    """Every recorded execution of one node of a run, oldest first."""

    workflow_id: str
    node_id: str
    executions: list[NodeExecutionView]


@router.get(
    "/runs/{workflow_id}/graph",
    response_model=RunGraph,
    summary="The graph a run executes (nodes and edges)",
    responses=VIEW_RESPONSES,
)
async def run_graph(
    workflow_id: str, *, run: ReadableRunDep, caller: CallerDep, archive: ArchiveDep
) -> RunGraph:
    try:
        source = await start_input(caller, workflow_id)
        return RunGraph(workflow_id=workflow_id, graph=source.graph)
    except (NotFound, Conflict) as exc:
        # Temporal's retention dropped the history: the registry may still know it.
        record = await archived_run(archive, workflow_id)
        spec = (
            await archive.get_graph(record.graph_name, tenant_id=record.tenant_id)
            if record is not None
            else None
        )
        if spec is None:
            raise NotFound(f"the graph of run '{workflow_id}' is no longer known") from exc
        return RunGraph(workflow_id=workflow_id, graph=spec)


def failed_items(envelope: Any) -> list[Any]:
    """Items of an output envelope's payload (seed 001 ``items[]``) that carry an error."""
    payload = envelope.get("payload") if isinstance(envelope, dict) else None
    items = payload.get("items") if isinstance(payload, dict) else None
    if not isinstance(items, list):
        return []
    failed = [item for item in items if isinstance(item, dict) and item.get("error")]
    return failed[:MAX_FAILED_ITEMS]


def launch_of(report: dict[str, Any]) -> str | None:
    """A workstream node's launch id: the first word of its report's summary, which the
    workflow writes as ``<launch id> launched`` or ``<launch id> <child state>``."""
    if report.get("node_type") != "workstream":
        return None
    summary = report.get("output_summary")
    words = summary.split() if isinstance(summary, str) else []
    return words[0] if len(words) == 2 else None


def _updates(envelope: Any, key: str) -> dict[str, Any] | None:
    """A node's writes to shared state or context, from its output envelope."""
    updates = envelope.get(key) if isinstance(envelope, dict) else None
    return updates if isinstance(updates, dict) else None


@router.get(
    "/runs/{workflow_id}/nodes/{node_id}",
    response_model=NodeInspection,
    summary="One node's executions: envelopes before and after, failed items",
    responses=VIEW_RESPONSES,
)
async def inspect_node(
    workflow_id: str, node_id: str, *, run: ReadableRunDep, archive: ArchiveDep
) -> NodeInspection:
    reports = [r for r in await archive.node_reports(workflow_id) if r.get("node_id") == node_id]
    executions = [
        NodeExecutionView(
            visit=int(report.get("visit") or 1),
            attempt=int(report.get("attempt") or 1),
            node_type=report.get("node_type"),
            status=str(report.get("status")),
            started_at=report.get("started_at"),
            duration_ms=float(report.get("duration_ms") or 0.0),
            error=report.get("error"),
            output_summary=report.get("output_summary"),
            input=report.get("input"),
            output=report.get("output"),
            failed_items=failed_items(report.get("output")),
            state_updates=_updates(report.get("output"), "stateUpdates"),
            context_updates=_updates(report.get("output"), "contextUpdates"),
            launch_id=launch_of(report),
        )
        for report in reports
    ]
    return NodeInspection(workflow_id=workflow_id, node_id=node_id, executions=executions)


@router.get(
    "/runs/{workflow_id}/usage",
    response_model=RunUsage,
    summary="LLM tokens, cost and time per node and workstream; map item counts",
    responses=VIEW_RESPONSES,
)
async def get_run_usage(
    workflow_id: str,
    *,
    run: ReadableRunDep,
    bus: BusDep,
    archive: ArchiveDep,
    settings: SettingsDep,
) -> RunUsage:
    return await run_usage(
        workflow_id,
        bus=bus,
        archive=archive if settings.archive_enabled else None,
        prices=settings.model_prices,
    )
