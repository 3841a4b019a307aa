"""Forking a run: ``POST /runs/{workflow_id}/fork`` starts a new run of the same graph.

The new run reuses the recorded outputs of the nodes that finished in the source
run before ``from_node`` (they complete without an activity) and executes from
``from_node`` on. The graph, input, context and meta come from the source
workflow's start event in Temporal (``services.run_records.start_input``, so
inline specs fork too); the outputs come
from the archive's node reports, plus the outputs the source itself reused when
it was a fork.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict, Field

from spindle.gateway.api.deps import ArchiveDep, CallerDep, ControllableRunDep
from spindle.gateway.models import StartRunResponse
from spindle.gateway.services.run_records import start_input
from spindle.gateway.services.run_starts import admit_start
from spindle.shared.contracts.errors import Conflict, ValidationFailed
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import (
    NodeStatus,
    ReplayedNode,
)
from spindle.shared.store.archive import RunArchive

router = APIRouter(tags=["runs"])

# The output envelope's own meta fields; everything else in it is propagated metadata.
ENVELOPE_META_KEYS = frozenset({"stepId", "status", "error", "userInputNeeded", "uiSchema"})

FORK_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {"description": "may see the run but not control it (problem+json)"},
    404: {"description": "unknown run (problem+json)"},
    409: {
        "description": "the source is not a graph run, or has no recorded node outputs "
        "(problem+json)"
    },
    422: {"description": "from_node is not a node of the run's graph (problem+json)"},
    429: {"description": "over the tenant's run-start limit; Retry-After (problem+json)"},
    503: {"description": "Temporal or MongoDB unavailable; retry (problem+json)"},
}


class ForkRequest(BaseModel):
    """Where to fork from, and what to change."""

    model_config = ConfigDict(extra="forbid")

    from_node: str = Field(..., min_length=1, max_length=128, description="first node to run")
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="edits merged into the recorded state: node id → output, or 'context'",
    )
    input: Any = Field(None, description="run input; default: the source run's input")


@router.post(
    "/runs/{workflow_id}/fork",
    status_code=status.HTTP_201_CREATED,
    response_model=StartRunResponse,
    summary="Start a new run that reuses this run's outputs up to a node",
    responses=FORK_RESPONSES,
)
async def fork_run(
    body: ForkRequest,
    run: ControllableRunDep,
    *,
    archive: ArchiveDep,
    caller: CallerDep,
) -> StartRunResponse:
    admitted = await admit_start(caller)
    identity = caller.identity
    source = await start_input(caller, run.workflow_id)
    graph = source.graph
    if body.from_node not in {node.id for node in graph.nodes}:
        raise ValidationFailed(
            f"from_node '{body.from_node}' is not a node of graph '{graph.name}'",
            errors=[{"field": "from_node", "reason": f"unknown node '{body.from_node}'"}],
        )
    recorded = await _recorded_outputs(archive, run.workflow_id)
    recorded = {**source.replayed_outputs, **recorded}
    if not recorded:
        raise Conflict(f"run '{run.workflow_id}' has no recorded node outputs to reuse")
    reused = {
        node_id: output
        for node_id, output in recorded.items()
        if node_id in reusable_nodes(graph, body.from_node)
    }
    context = dict(source.context)
    for key, value in body.state.items():
        if key == "context" and isinstance(value, dict):
            context.update(value)
        elif key in reused:
            reused[key] = reused[key].model_copy(update={"output": value})
        else:
            raise ValidationFailed(
                f"state key '{key}' is neither 'context' nor a reused node",
                errors=[{"field": f"state.{key}", "reason": f"reused: {sorted(reused)}"}],
            )
    run_input = source.model_copy(
        update={
            "input": body.input if "input" in body.model_fields_set else source.input,
            "context": context,
            "tenant_id": identity.tenant_id,
            "user_id": identity.user_id,
            "stream_id": None,
            "workstream_id": "main",
            "replayed_outputs": reused,
            "fork_of": run.workflow_id,
            # The source may have continued as new: the fork starts afresh.
            "carried": None,
        }
    )
    return await admitted.start_input(run_input)


def reusable_nodes(graph: GraphSpec, from_node: str) -> set[str]:
    """Nodes whose recorded output a fork may reuse.

    Every node except ``from_node`` and what is reachable from it (over any
    edge, loops included), and except nodes with port-conditioned outgoing
    edges: their chosen ports are not recorded, so they run again.
    """
    reachable = {from_node}
    frontier = [from_node]
    while frontier:
        current = frontier.pop()
        for edge in graph.edges:
            if edge.from_ == current and edge.to not in reachable:
                reachable.add(edge.to)
                frontier.append(edge.to)
    port_deciders = {edge.from_ for edge in graph.edges if edge.from_port is not None}
    return {node.id for node in graph.nodes} - reachable - port_deciders


async def _recorded_outputs(archive: RunArchive, workflow_id: str) -> dict[str, ReplayedNode]:
    """Each node's recorded outcome in the source run; its latest successful visit wins."""
    outcomes: dict[str, tuple[int, ReplayedNode]] = {}
    for report in await archive.node_reports(workflow_id):
        if report.get("status") != NodeStatus.SUCCESS.value:
            continue
        node_id, visit = str(report["node_id"]), int(report.get("visit") or 1)
        if node_id in outcomes and visit < outcomes[node_id][0]:
            continue
        envelope = report.get("output")
        envelope = envelope if isinstance(envelope, dict) else {}
        meta = envelope.get("meta")
        propagated = {
            key: value
            for key, value in (meta if isinstance(meta, dict) else {}).items()
            if key not in ENVELOPE_META_KEYS
        }
        outcomes[node_id] = (visit, ReplayedNode(output=envelope.get("payload"), meta=propagated))
    return {node_id: outcome for node_id, (_, outcome) in outcomes.items()}
