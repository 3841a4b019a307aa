"""Graph structure: parsing a document into a ``GraphSpec`` and the rules that need no
node-type knowledge (ids, entry, edges, reachability, bounded cycles, expressions).

A graph is validated completely before a run starts, so that a broken graph is
refused with an error naming the node and the rule, and no workflow is started.
"""

from __future__ import annotations

import hashlib
import json
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


def name_inline_graph(document: dict[str, Any]) -> dict[str, Any]:
    """An inline graph document with a ``name``: its own, or ``inline-<hash>``.

    The generated name is the first 12 hex digits of the SHA-256 of the document's
    canonical JSON (sorted keys), so the same inline spec is always named alike
    (docs/api/index.md, "Starting a run with an inline graph").
    """
    if document.get("name") is not None:
        return document
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return {**document, "name": f"inline-{digest}"}


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
    Every broken rule is reported at once (``structure_errors``).

    Raises:
        GraphInvalid: naming each node and rule broken.
    """
    errors = structure_errors(spec)
    if errors:
        raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors)


def sound_edges(spec: GraphSpec) -> GraphSpec:
    """``spec`` without the edges whose ends are not defined (dangling edges).

    What the checks that follow edges (reachability, cycles, loop bounds) work on,
    so that a dangling edge, reported once, hides no other fault.
    """
    ids = {node.id for node in spec.nodes}
    edges = [e for e in spec.edges if e.from_ in ids and e.to in ids]
    return spec if len(edges) == len(spec.edges) else spec.model_copy(update={"edges": edges})


def structure_errors(spec: GraphSpec) -> list[dict[str, Any]]:
    """Every rule ``validate_structure`` checks, each fault reported, none hiding another.

    Reachability and cycles follow only the edges whose ends exist (a dangling edge
    is reported on its own); with no entry node they are not checked (every node
    would be unreachable from it).
    """
    errors = _ids_and_edges(spec) + _expressions(spec)
    if any(node.id == spec.entry for node in spec.nodes):
        sound = sound_edges(spec)
        errors += _reachability(sound) + _bounded_cycles(sound, spec)
    return errors


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
                    node.id,
                    "duplicate_node_id",
                    f"node '{node.id}' is defined more than once",
                    "id",
                )
            )
        seen.add(node.id)
    if spec.entry not in seen:
        errors.append(
            _problem(
                spec.entry, "missing_entry", f"entry node '{spec.entry}' is not defined", "entry"
            )
        )
    for i, edge in enumerate(spec.edges):
        for end, role in ((edge.from_, "from"), (edge.to, "to")):
            if end not in seen:
                message = f"edge {edge.from_} → {edge.to}: '{role}' node '{end}' is not defined"
                errors.append(_problem(end, "dangling_edge", message, f"edges[{i}].{role}"))
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


def _bounded_cycles(spec: GraphSpec, numbering: GraphSpec) -> list[Problem]:
    errors: list[Problem] = []
    for edge_index in sorted(find_back_edges(spec)):
        edge = spec.edges[edge_index]
        target = spec.node(edge.to)
        if edge.max_iterations is None and target.max_visits is None:
            message = (
                f"edge {edge.from_} → {edge.to} closes a cycle with no bound: "
                f"set max_iterations on the edge or max_visits on node '{edge.to}'"
            )
            # Numbered as in ``numbering`` (the graph as written, dangling edges included).
            where = next(i for i, e in enumerate(numbering.edges) if e is edge)
            errors.append(_problem(edge.to, "unbounded_cycle", message, f"edges[{where}]"))
    return errors
