"""Graph rules for payload schemas and shared state (docs/graphs/index.md).

- ``input_schema`` / ``output_schema`` on a node are valid JSON Schemas (``bad_schema``),
  on node types whose data the worker checks: those that run as an activity, and
  ``map`` (per item) (``schema_not_checked`` otherwise);
- a node's ``writes`` name only keys the graph declares in ``state.writable``
  (``undeclared_state_key``), which are unique (``duplicate_state_key``), and no
  node of a graph with shared state has the id ``state`` (``reserved_state_key``);
- in a graph with shared state, an edge's ``when``, a node's ``inputs`` and the
  ``{{ }}`` templates of its params read only declared keys (``state.<key>`` at the
  root of the run state; ``undeclared_state_key``), so a misspelt key is a 422.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as BadSchema

from spindle.shared.contracts.graph_spec import SHARED_STATE_KEY, GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.expressions import (
    ExpressionError,
    compile_expression,
    template_expressions,
)
from spindle.shared.graphs.graph_errors import GraphError, graph_error
from spindle.shared.graphs.node_types import RunKind

_CHECKED_KINDS = frozenset({RunKind.ACTIVITY.value, RunKind.MAP.value})
# AST nodes whose children all see the run state itself (the rest derive a context).
_SAME_CONTEXT = frozenset(
    {"or_expression", "and_expression", "not_expression", "comparator", "function_expression"}
    | {"multi_select_list", "multi_select_dict", "key_val_pair"}
)
_LEFT_ONLY = frozenset(
    {"pipe", "index_expression", "projection", "value_projection", "filter_projection"}
    | {"flatten"}
)


def _state_keys(node: Mapping[str, Any]) -> Iterator[str]:
    """The ``state.<key>`` keys an AST node evaluated against the run state reads."""
    kind = node.get("type")
    children: list[Mapping[str, Any]] = node.get("children") or []
    if kind == "subexpression" and len(children) > 1:
        first, second = children[0], children[1]
        if first.get("type") == "field" and first.get("value") == SHARED_STATE_KEY:
            if second.get("type") == "field":
                yield str(second["value"])
            return
        yield from _state_keys(first)
    elif kind in _SAME_CONTEXT:
        for child in children:
            yield from _state_keys(child)
    elif kind in _LEFT_ONLY and children:
        yield from _state_keys(children[0])


def _expression_keys(text: str, template: bool) -> list[str]:
    try:
        expressions = template_expressions(text) if template else [text]
        return [k for e in expressions for k in _state_keys(compile_expression(e).parsed)]
    except ExpressionError:
        return []  # reported by the expression checks


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _reads(spec: GraphSpec) -> Iterator[tuple[str | None, str, str]]:
    """(node, field, key) of every ``state.<key>`` the graph's expressions read."""
    for index, edge in enumerate(spec.edges):
        for key in _expression_keys(edge.when, False) if edge.when else []:
            yield None, f"edges[{index}].when", key
    for node in spec.nodes:
        for name, expression in node.inputs.items():
            for key in _expression_keys(expression, False):
                yield node.id, f"inputs.{name}", key
        for name, value in node.params.items():
            for text in _strings(value):
                for key in _expression_keys(text, True):
                    yield node.id, f"params.{name}", key


def payload_schema_faults(spec: GraphSpec, catalog: Catalog) -> list[GraphError]:
    """Each node's payload schemas: valid, and on a type whose data is checked."""
    errors: list[GraphError] = []
    for node in spec.nodes:
        for field in ("input_schema", "output_schema"):
            schema = getattr(node, field)
            if schema is None:
                continue
            try:
                Draft202012Validator.check_schema(schema)
            except BadSchema as exc:
                errors.append(graph_error(node.id, field, "bad_schema", exc.message))
            info = catalog.node_types.get(node.type)
            if info is not None and info.runs not in _CHECKED_KINDS:
                errors.append(
                    graph_error(
                        node.id,
                        field,
                        "schema_not_checked",
                        f"a '{node.type}' node's data is not checked against {field}: "
                        "only node types that run as an activity (tool, router, output, "
                        "filter, merge, plug-in types) and map (per item) are; an agent "
                        "has params.output_schema, a prompt params.ui_schema",
                    )
                )
    return errors


def shared_state_faults(spec: GraphSpec) -> list[GraphError]:
    """``state.writable`` and the nodes' ``writes`` agree (see the module docstring)."""
    errors: list[GraphError] = []
    writable = spec.state.writable if spec.state is not None else []
    seen: set[str] = set()
    for key in writable:
        if key in seen:
            message = f"'{key}' is declared twice"
            errors.append(graph_error(None, "state.writable", "duplicate_state_key", message))
        seen.add(key)
    declared = ", ".join(sorted(seen)) or "none: the graph has no state.writable"
    if spec.state is not None:
        for node_id, field, key in _reads(spec):
            if key not in seen:
                message = f"reads state key '{key}', which is not declared (declared: {declared})"
                errors.append(graph_error(node_id, field, "undeclared_state_key", message))
    for node in spec.nodes:
        if spec.state is not None and node.id == SHARED_STATE_KEY:
            message = "'state' holds the graph's shared state: rename the node"
            errors.append(graph_error(node.id, "id", "reserved_state_key", message))
        for key in node.writes or ():
            if key not in seen:
                errors.append(
                    graph_error(
                        node.id,
                        "writes",
                        "undeclared_state_key",
                        f"state key '{key}' is not declared writable (declared: {declared}); "
                        "add it to the graph's state.writable",
                    )
                )
    return errors
