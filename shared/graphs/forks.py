"""Building a fork's ``GraphRunInput`` from its source run (pure: no I/O).

The gateway's ``POST /runs/{id}/fork`` (``spindle.gateway.services.run_forks``) and,
next, the evaluations workflow's activity build forks here, so both reuse the same
outputs by the same rules (docs/replay-and-compare.md):

* The graph is the candidate (``ForkRequest.graph`` / ``graph_spec``, resolved by the
  caller) or the source's, with ``overrides`` merged into its nodes' params.
* A node's recorded output is reused when the node is not ``from_node`` nor reachable
  from it (over any edge, loops included), does not choose ports (chosen ports are not
  recorded), is unchanged from the source graph (same spec after overrides) and no
  node it is reachable from changed: a changed node runs again, and so does everything
  downstream of it.
* ``state`` edits replace reused nodes' outputs, or merge into ``context``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spindle.shared.contracts.errors import Conflict, ValidationFailed
from spindle.shared.contracts.forks import ForkRequest, ReplaySource
from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
from spindle.shared.contracts.runs import GraphRunInput, NodeStatus, ReplayedNode

# The output envelope's own meta fields; everything else in it is propagated metadata.
ENVELOPE_META_KEYS = frozenset({"stepId", "status", "error", "userInputNeeded", "uiSchema"})


def with_overrides(graph: GraphSpec, request: ForkRequest) -> GraphSpec:
    """``graph`` with each override's params merged into its node's params.

    Raises:
        ValidationFailed: an override names a node the graph does not have.
    """
    ids = {node.id for node in graph.nodes}
    unknown = sorted(set(request.overrides) - ids)
    if unknown:
        raise ValidationFailed(
            f"overrides name nodes graph '{graph.name}' does not have: {', '.join(unknown)}",
            errors=[
                {"field": f"overrides.{node_id}", "reason": f"unknown node '{node_id}'"}
                for node_id in unknown
            ],
        )
    if not request.overrides:
        return graph
    nodes = [
        node.model_copy(
            update={"params": {**node.params, **request.overrides[node.id].params}}, deep=True
        )
        if node.id in request.overrides
        else node
        for node in graph.nodes
    ]
    return graph.model_copy(update={"nodes": nodes})


def reachable_from(graph: GraphSpec, starts: Iterable[str]) -> set[str]:
    """``starts`` and every node reachable from them over any edge (loops included)."""
    reachable = set(starts)
    frontier = list(reachable)
    while frontier:
        current = frontier.pop()
        for edge in graph.edges:
            if edge.from_ == current and edge.to not in reachable:
                reachable.add(edge.to)
                frontier.append(edge.to)
    return reachable


def reusable_nodes(graph: GraphSpec, from_node: str, changed: Iterable[str] = ()) -> set[str]:
    """Nodes whose recorded output a fork may reuse.

    Every node except ``from_node``, the ``changed`` nodes and what is reachable from
    them, and except nodes with port-conditioned outgoing edges: their chosen ports are
    not recorded, so they run again.
    """
    rerun = reachable_from(graph, [from_node, *changed])
    port_deciders = {edge.from_ for edge in graph.edges if edge.from_port is not None}
    return {node.id for node in graph.nodes} - rerun - port_deciders


def _node_key(node: NodeSpec) -> dict[str, Any]:
    return node.model_dump(mode="json", by_alias=True, exclude={"label"})


def changed_nodes(source: GraphSpec, candidate: GraphSpec) -> set[str]:
    """Candidate nodes that are new or whose spec differs from the source's (labels aside)."""
    before = {node.id: _node_key(node) for node in source.nodes}
    return {node.id for node in candidate.nodes if before.get(node.id) != _node_key(node)}


def recorded_outputs(reports: Iterable[dict[str, Any]]) -> dict[str, ReplayedNode]:
    """Each node's recorded outcome in archived node reports; its latest successful visit wins."""
    outcomes: dict[str, tuple[int, ReplayedNode]] = {}
    for report in reports:
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


def _edited(
    reused: dict[str, ReplayedNode], context: dict[str, Any], state: dict[str, Any]
) -> None:
    """Apply ``state`` edits to the reused outputs and the context, in place."""
    for key, value in state.items():
        if key == "context" and isinstance(value, dict):
            context.update(value)
        elif key in reused:
            reused[key] = reused[key].model_copy(update={"output": value})
        else:
            raise ValidationFailed(
                f"state key '{key}' is neither 'context' nor a reused node",
                errors=[{"field": f"state.{key}", "reason": f"reused: {sorted(reused)}"}],
            )


def build_fork_input(
    source: GraphRunInput,
    recorded: dict[str, ReplayedNode],
    request: ForkRequest,
    *,
    source_workflow_id: str,
    candidate: GraphSpec | None,
    tenant_id: str,
    user_id: str | None,
) -> GraphRunInput:
    """The fork's ``GraphRunInput``: the source's start, changed as ``request`` asks.

    Args:
        source: the source run's start input (its Temporal start event).
        recorded: the source's recorded outcomes by node (``recorded_outputs``).
        request: what to change.
        source_workflow_id: the source run.
        candidate: the resolved candidate graph (``graph``/``graph_spec``); None: the
            source's graph.
        tenant_id: the tenant the fork runs for.
        user_id: who starts the fork.

    Raises:
        ValidationFailed: ``from_node``, an override or a state key names no such node.
        Conflict: ``from_node`` is past the entry and the source recorded no outputs.
    """
    graph = with_overrides(candidate or source.graph, request)
    from_node = request.from_node or graph.entry
    if from_node not in {node.id for node in graph.nodes}:
        raise ValidationFailed(
            f"from_node '{from_node}' is not a node of graph '{graph.name}'",
            errors=[{"field": "from_node", "reason": f"unknown node '{from_node}'"}],
        )
    # The source's own reused outputs count as recorded (a fork of a fork).
    recorded = {**source.replayed_outputs, **recorded}
    if from_node != graph.entry and not recorded:
        raise Conflict(f"run '{source_workflow_id}' has no recorded node outputs to reuse")
    changed = changed_nodes(source.graph, graph)
    reusable = reusable_nodes(graph, from_node, changed)
    reused = {node_id: out for node_id, out in recorded.items() if node_id in reusable}
    context = dict(source.context)
    _edited(reused, context, request.state)
    lineage = ReplaySource(
        workflow_id=source_workflow_id,
        from_node=from_node,
        overrides=request.overrides,
        graph=graph.name,
        graph_version=graph.version,
        graph_changed=bool(changed) or graph.name != source.graph.name,
        tools=request.tools,
        llm=request.llm,
        on_miss=request.on_miss,
        reused=sorted(reused),
    )
    return source.model_copy(
        update={
            "graph": graph,
            "input": request.input if "input" in request.model_fields_set else source.input,
            "context": context,
            "tenant_id": tenant_id,
            "user_id": user_id,
            "stream_id": None,
            "workstream_id": "main",
            "replayed_outputs": reused,
            "fork_of": source_workflow_id,
            "replay": lineage,
            # The source may have continued as new: the fork starts afresh.
            "carried": None,
            "scheduled_by": None,
        }
    )
