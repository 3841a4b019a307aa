"""Graph structure: parsing a document into a ``GraphSpec`` and the rules that need no
node-type knowledge (ids, entry, edges, reachability, bounded cycles, expressions).

A graph is validated completely before a run starts, so that a broken graph is
refused with an error naming the node and the rule, and no workflow is started.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.expressions import ExpressionError, compile_expression, rule_of


def parse_graph(data: dict[str, Any] | str) -> GraphSpec:
    """Parse a graph from a dict or JSON/YAML text, naming what is wrong.

    Raises:
        GraphInvalid: the document does not match the schema.
    """
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise GraphInvalid(f"graph is not valid JSON/YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise GraphInvalid("graph must be an object")
    try:
        return GraphSpec.model_validate(data)
    except ValidationError as exc:
        errors = [_describe_pydantic_error(data, e) for e in exc.errors()]
        raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors) from exc


def _describe_pydantic_error(data: dict[str, Any], err: Any) -> dict[str, Any]:
    loc = list(err["loc"])
    where = ".".join(str(p) for p in loc)
    node_id = None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = data.get("nodes")
        if isinstance(nodes, list) and loc[1] < len(nodes) and isinstance(nodes[loc[1]], dict):
            node_id = nodes[loc[1]].get("id")
    prefix = f"node '{node_id}': " if node_id else ""
    return {
        "node": node_id,
        "field": where,
        "rule": err["type"],
        "message": f"{prefix}{where}: {err['msg']}",
    }


def find_back_edges(spec: GraphSpec) -> set[int]:
    """Indexes of edges that close a cycle (to an ancestor in a DFS from entry).

    The scheduler treats these as loop-backs; every other edge is forward, and the
    forward edges form a DAG.
    """
    index_by_from: dict[str, list[int]] = {}
    for i, edge in enumerate(spec.edges):
        index_by_from.setdefault(edge.from_, []).append(i)
    back: set[int] = set()
    state: dict[str, int] = {}  # 1 = on stack, 2 = done

    # Iterative DFS so deep graphs cannot hit the recursion limit.
    stack: list[tuple[str, int]] = [(spec.entry, 0)]
    state[spec.entry] = 1
    while stack:
        node_id, pos = stack[-1]
        out = index_by_from.get(node_id, [])
        if pos < len(out):
            stack[-1] = (node_id, pos + 1)
            edge_index = out[pos]
            target = spec.edges[edge_index].to
            mark = state.get(target, 0)
            if mark == 1:
                back.add(edge_index)
            elif mark == 0:
                state[target] = 1
                stack.append((target, 0))
        else:
            state[node_id] = 2
            stack.pop()
    return back


def validate_structure(spec: GraphSpec) -> None:
    """Check the rules that need no node-type knowledge.

    Rules: unique node ids, entry exists, every edge end exists, every node is
    reachable from the entry, every cycle is bounded, every expression compiles.
    Reachability and cycles are checked only once the ids and edges are sound.

    Raises:
        GraphInvalid: naming each node and rule broken.
    """
    for rules in ((_ids_and_edges, _expressions), (_reachability, _bounded_cycles)):
        errors = [error for rule in rules for error in rule(spec)]
        if errors:
            raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors)


Problem = dict[str, Any]


def _problem(node: str | None, rule: str, message: str, field: str | None = None) -> Problem:
    problem: Problem = {"node": node, "rule": rule, "message": message}
    if field is not None:
        problem["field"] = field
    return problem


def _ids_and_edges(spec: GraphSpec) -> list[Problem]:
    errors: list[Problem] = []
    seen: set[str] = set()
    for node in spec.nodes:
        if node.id in seen:
            errors.append(
                _problem(
                    node.id, "duplicate_node_id", f"node '{node.id}' is defined more than once"
                )
            )
        seen.add(node.id)
    if spec.entry not in seen:
        errors.append(
            _problem(spec.entry, "missing_entry", f"entry node '{spec.entry}' is not defined")
        )
    for edge in spec.edges:
        for end, role in ((edge.from_, "from"), (edge.to, "to")):
            if end not in seen:
                message = f"edge {edge.from_} → {edge.to}: '{role}' node '{end}' is not defined"
                errors.append(_problem(end, "dangling_edge", message))
    return errors


def _expressions(spec: GraphSpec) -> list[Problem]:
    errors: list[Problem] = []
    for i, edge in enumerate(spec.edges):
        if edge.when is not None:
            try:
                compile_expression(edge.when)
            except ExpressionError as exc:
                message = f"edge {edge.from_} → {edge.to}: when: {exc}"
                rule = rule_of(exc, "bad_condition")
                errors.append(_problem(edge.from_, rule, message, f"edges[{i}].when"))
    for node in spec.nodes:
        for param, expr in node.inputs.items():
            try:
                compile_expression(expr)
            except ExpressionError as exc:
                message = f"node '{node.id}': inputs.{param}: {exc}"
                rule = rule_of(exc, "bad_input_mapping")
                errors.append(_problem(node.id, rule, message, f"inputs.{param}"))
    return errors


def _reachability(spec: GraphSpec) -> list[Problem]:
    reachable: set[str] = set()
    frontier = [spec.entry]
    while frontier:
        current = frontier.pop()
        if current in reachable:
            continue
        reachable.add(current)
        frontier.extend(e.to for e in spec.outgoing(current))
    return [
        _problem(n.id, "unreachable_node", f"node '{n.id}' is not reachable from the entry")
        for n in spec.nodes
        if n.id not in reachable
    ]


def _bounded_cycles(spec: GraphSpec) -> list[Problem]:
    errors: list[Problem] = []
    for edge_index in sorted(find_back_edges(spec)):
        edge = spec.edges[edge_index]
        target = spec.node(edge.to)
        if edge.max_iterations is None and target.max_visits is None:
            message = (
                f"edge {edge.from_} → {edge.to} closes a cycle with no bound: "
                f"set max_iterations on the edge or max_visits on node '{edge.to}'"
            )
            errors.append(_problem(edge.to, "unbounded_cycle", message))
    return errors
