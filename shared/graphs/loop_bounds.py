"""How often each node of a graph may run, from the bounds its loops state.

A node runs once, and once more each time a loop-back edge whose region holds it
is taken (the scheduler resets the region forward-reachable from the loop's target:
``spindle.worker.workflows.scheduler``). A back edge is taken at most
``max_iterations`` times per pass of each loop enclosing it (an enclosing loop's
traversal starts its count afresh) and, when its target has ``max_visits``, fewer
times than that; a node's own ``max_visits`` caps it too. The result is the most
the scheduler can run a node, what validation holds against the ``max_node_visits``
setting (docs/graphs/index.md, "Loops and bounds").

Pure: no I/O, used by the gateway's validation and the unit tests.
"""

from __future__ import annotations

import math

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.structure import find_back_edges


def _regions(spec: GraphSpec, back: set[int]) -> dict[str, frozenset[str]]:
    """Each node's forward-reachable nodes (itself included), back edges left out."""
    out: dict[str, list[str]] = {node.id: [] for node in spec.nodes}
    for index, edge in enumerate(spec.edges):
        if index not in back:
            out[edge.from_].append(edge.to)
    regions: dict[str, frozenset[str]] = {}
    for node in spec.nodes:
        seen = {node.id}
        frontier = [node.id]
        while frontier:
            for target in out[frontier.pop()]:
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        regions[node.id] = frozenset(seen)
    return regions


def max_visits_by_node(spec: GraphSpec) -> dict[str, float]:
    """The most executions of each node the graph's bounds allow (``math.inf``:
    a cycle without a bound, which structural validation refuses).

    Args:
        spec: a structurally valid graph (ids and edges sound).
    """
    back = find_back_edges(spec)
    regions = _regions(spec, back)
    own = {node.id: node.max_visits for node in spec.nodes}
    totals: dict[int, float] = {}

    def total(index: int) -> float:
        """Traversals of back edge ``index`` over the whole run."""
        if index in totals:
            return totals[index]
        edge = spec.edges[index]
        # Loops whose region holds this loop's target restart its count: the
        # forward graph is acyclic, so this recursion ends.
        passes = 1.0 + sum(
            total(outer)
            for outer in back
            if outer != index
            and spec.edges[outer].to != edge.to
            and edge.to in regions[spec.edges[outer].to]
        )
        by_edge = math.inf if edge.max_iterations is None else edge.max_iterations * passes
        target = own[edge.to]
        totals[index] = min(by_edge, math.inf if target is None else float(target))
        return totals[index]

    bounds: dict[str, float] = {}
    for node in spec.nodes:
        runs = 1.0 + sum(total(i) for i in back if node.id in regions[spec.edges[i].to])
        limit = own[node.id]
        bounds[node.id] = min(runs, math.inf if limit is None else float(limit))
    return bounds


def over_visit_cap(spec: GraphSpec, cap: int) -> dict[str, float]:
    """Nodes the graph's bounds allow to run more than ``cap`` times, and how often."""
    return {node: most for node, most in max_visits_by_node(spec).items() if most > cap}
