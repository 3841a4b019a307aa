"""Validating a graph and a run input against what the workers offer.

The gateway calls these before starting a run, so a broken graph or input is
refused with a 4xx naming the node, field and rule, and no workflow starts.
``spindle.shared.graphs.structure`` checks the shape; this module adds what needs the
catalog (node types, their parameters, tools and templates) and reports every fault in
one answer (docs/graphs/index.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as BadSchema
from pydantic import BaseModel, ValidationError

from spindle.shared.contracts.errors import ExecutorNotFound, GraphInvalid, InputInvalid
from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.expressions import (
    ExpressionError,
    compile_expression,
    rule_of,
    template_expressions,
)
from spindle.shared.graphs.graph_errors import GraphError, graph_error, schema_errors
from spindle.shared.graphs.loop_bounds import over_visit_cap
from spindle.shared.graphs.node_rules import item_agent_errors
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES, RunKind
from spindle.shared.graphs.payload_rules import payload_schema_faults, shared_state_faults
from spindle.shared.graphs.structure import sound_edges, structure_errors


def _check_params_model(node: NodeSpec, model: type[BaseModel]) -> list[GraphError]:
    covered = set(node.inputs)
    try:
        model.model_validate(node.params)
    except ValidationError as exc:
        errors = []
        for e in exc.errors():
            loc = [str(p) for p in e["loc"]]
            if loc and loc[0] in covered:
                continue  # the value comes from ``inputs`` at run time
            field = "params" + ("." + ".".join(loc) if loc else "")
            errors.append(graph_error(node.id, field, e["type"], e["msg"]))
        return errors
    return []


def _check_params_schema(node: NodeSpec, schema: dict[str, Any]) -> list[GraphError]:
    if not schema:
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except BadSchema:
        return []  # a worker published a broken schema: nothing to check against
    return [
        graph_error(node.id, f"params.{path}" if path else "params", rule, message)
        for path, rule, message in schema_errors(schema, node.params, skip=set(node.inputs))
    ]


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}")]
    return []


def _check_expressions(
    node: NodeSpec, templates: Collection[str], expressions: Collection[str]
) -> list[GraphError]:
    """Template and expression params compile (those ``inputs`` supply excepted)."""
    errors = []
    for name in templates:
        if name in node.inputs or name not in node.params:
            continue
        for path, text in _strings(node.params[name], f"params.{name}"):
            try:
                for expression in template_expressions(text):
                    compile_expression(expression)
            except ExpressionError as exc:
                rule = rule_of(exc, "bad_template")
                errors.append(graph_error(node.id, path, rule, str(exc)))
    for name in expressions:
        value = node.params.get(name)
        if isinstance(value, str) and name not in node.inputs:
            try:
                compile_expression(value)
            except ExpressionError as exc:
                field = f"params.{name}"
                rule = rule_of(exc, "bad_expression")
                errors.append(graph_error(node.id, field, rule, str(exc)))
    return errors


def _check_node(spec: GraphSpec, node: NodeSpec, catalog: Catalog) -> list[GraphError]:
    """A node of a known type: params, templates and expressions, the type's own rules.

    A built-in type is checked with its spec (pydantic model, rules); another type
    with what its worker published (JSON Schema, templates, expressions).
    """
    builtin = BUILTIN_NODE_TYPES.get(node.type)
    if builtin is None:
        info = catalog.node_types[node.type]
        errors = _check_params_schema(node, info.params_schema)
        errors.extend(_check_expressions(node, info.templates, info.expressions))
        return errors
    # A built-in's own spec wins over what a worker published (an older catalog
    # in the archive may predate its templates).
    errors = _check_params_model(node, builtin.params) if builtin.params is not None else []
    errors.extend(_check_expressions(node, builtin.checked_templates, builtin.expressions))
    for rule in builtin.rules:
        errors.extend(rule(node, spec, catalog))
    if builtin.inline_node is not None:
        errors.extend(_check_inline_node(spec, node, builtin.inline_node, catalog))
    return errors


def _check_inline_node(
    spec: GraphSpec, node: NodeSpec, param: str, catalog: Catalog
) -> list[GraphError]:
    """The node a ``map`` runs per item, checked like a node of the graph.

    Its problems are reported on the outer node, at ``params.<param>.<field>``.
    """
    value = node.params.get(param)
    if param in node.inputs or not isinstance(value, dict):
        return []  # a missing or malformed definition is the params model's to report
    where = f"params.{param}"
    inline_type = value.get("type")
    if not isinstance(inline_type, str) or inline_type not in catalog.node_types:
        if not isinstance(inline_type, str):
            return []
        known = ", ".join(sorted(catalog.node_types))
        message = f"unknown node type '{inline_type}' (known: {known})"
        return [graph_error(node.id, f"{where}.type", "unknown_node_type", message)]
    # An agent runs per item as its own LLM loop inside the batch (docs/graphs/items.md).
    per_item = (
        inline_type == "agent" or catalog.node_types[inline_type].runs == RunKind.ACTIVITY.value
    )
    if not per_item:
        message = (
            f"a '{inline_type}' node cannot run per item: only agents and node types "
            "that run as an activity can (agent, tool, router, output, plug-in types)"
        )
        return [graph_error(node.id, f"{where}.type", "not_per_item", message)]
    if inline_type == "agent":
        refused = item_agent_errors(value.get("params") or {})
        if refused:
            return [
                graph_error(node.id, f"{where}.params.{k}", "not_per_item", m) for k, m in refused
            ]
    try:
        inline = NodeSpec(
            id=node.id,
            type=inline_type,
            params=value.get("params") or {},
            inputs=value.get("inputs") or {},
        )
    except ValidationError:
        return []  # the params model reports the bad fields
    relocated = []
    for error in _check_node(spec, inline, catalog):
        field = error["field"]
        prefix = f"node '{node.id}': " + (f"{field}: " if field else "")
        message = str(error["message"]).removeprefix(prefix)
        inner = f"{where}.{field}" if field else where
        relocated.append(graph_error(node.id, inner, error["rule"], message))
    return relocated


def _check_routing(spec: GraphSpec, known_types: Collection[str]) -> list[GraphError]:
    """``task_queues`` names only known node types; a local node takes no queue."""
    errors = [
        graph_error(
            None,
            f"task_queues.{node_type}",
            "unknown_node_type",
            f"unknown node type '{node_type}' (known: {', '.join(sorted(known_types))})",
        )
        for node_type in spec.task_queues
        if node_type not in known_types
    ]
    errors.extend(
        graph_error(
            node.id,
            "task_queue",
            "local_task_queue",
            "a local node runs on the run's own worker, not on a task queue: "
            "drop task_queue or local",
        )
        for node in spec.nodes
        if node.local and node.task_queue is not None
    )
    return errors


def _check_visit_cap(spec: GraphSpec, cap: int | None) -> list[GraphError]:
    """No node may run more often than the ``max_node_visits`` setting allows.

    Dangling edges are left out (reported on their own); a node in a cycle with no
    bound (``unbounded_cycle``, reported by the structure) is not reported again.
    """
    if cap is None:
        return []
    return [
        graph_error(
            node_id,
            "max_visits",
            "exceeds_max_node_visits",
            f"its loops' bounds let it run {int(most):,} times, more than the "
            f"max_node_visits setting ({cap:,}; SPINDLE_MAX_NODE_VISITS) allows: a run "
            "would fail there. Lower max_iterations or max_visits, or raise the setting",
        )
        for node_id, most in over_visit_cap(sound_edges(spec), cap).items()
        if not math.isinf(most)
    ]


def _unknown_type(node: NodeSpec, known_types: Collection[str]) -> GraphError:
    known = ", ".join(sorted(known_types))
    message = f"unknown node type '{node.type}' (known: {known})"
    return graph_error(node.id, "type", "unknown_node_type", message)


def graph_faults(
    spec: GraphSpec, catalog: Catalog, *, max_node_visits: int | None = None
) -> list[GraphError]:
    """Every fault of ``spec`` found in one pass, each with node, field, rule and message.

    No check stops another: a dangling edge, an unreachable node, an unknown node
    type and bad params of another node are all reported together. A check is
    skipped only where it depends on the broken part itself: reachability and
    cycles follow the edges whose ends exist (and need the entry node); a node of
    an unknown type has no params to check.
    """
    catalog = Catalog.builtin().merged(catalog)
    errors = [_as_graph_error(problem) for problem in structure_errors(spec)]
    errors.extend(_check_routing(spec, catalog.node_types))
    errors.extend(_check_visit_cap(spec, max_node_visits))
    errors.extend(payload_schema_faults(spec, catalog) + shared_state_faults(spec))
    for node in spec.nodes:
        if node.type in catalog.node_types:
            errors.extend(_check_node(spec, node, catalog))
        else:
            errors.append(_unknown_type(node, catalog.node_types))
    return errors


def _as_graph_error(problem: dict[str, Any]) -> GraphError:
    """A structural problem with every key of a ``GraphError`` (``field`` may be None)."""
    return {
        "node": problem.get("node"),
        "field": problem.get("field"),
        "rule": problem["rule"],
        "message": problem["message"],
    }


def validate_graph(
    spec: GraphSpec, catalog: Catalog, *, max_node_visits: int | None = None
) -> None:
    """Check a graph completely before a run starts, reporting every fault at once.

    Structure (``spindle.shared.graphs.structure.structure_errors``: ids, entry,
    edges, reachability, bounded cycles, expressions), then per node: the type is
    known; the params are valid (pydantic models of the built-ins, the published
    JSON Schema of other types; params supplied by ``inputs`` are not required);
    templates and expressions compile; tools exist (when the catalog knows them);
    router ports used by edges exist. Routing: ``task_queues`` maps known node
    types only, and no local node names a task queue. Loops: with
    ``max_node_visits`` (the setting), no node's bounds may let it run more often
    (``spindle.shared.graphs.loop_bounds``). All are collected (``graph_faults``)
    and raised together.

    Raises:
        GraphInvalid: structure or parameters are wrong; ``errors`` names each
            node, field and rule.
        ExecutorNotFound: a node's type is unknown (``errors`` names every problem,
            the other faults included).
    """
    errors = graph_faults(spec, catalog, max_node_visits=max_node_visits)
    if errors:
        detail = "; ".join(e["message"] for e in errors)
        unknown = any(e["rule"] == "unknown_node_type" and e["field"] == "type" for e in errors)
        raise (ExecutorNotFound if unknown else GraphInvalid)(detail, errors=errors)


def validate_run_input(spec: GraphSpec, input: Any) -> None:
    """Check a run's input against the graph's ``input_schema`` (if it has one).

    Raises:
        InputInvalid: ``errors`` name each field (``input.<path>``) and the
            JSON-Schema rule it breaks.
    """
    if spec.input_schema is None:
        return
    try:
        Draft202012Validator.check_schema(spec.input_schema)
    except BadSchema as exc:
        raise GraphInvalid(
            f"graph '{spec.name}': input_schema is not a valid JSON Schema: {exc.message}",
            errors=[
                {
                    "node": None,
                    "field": "input_schema",
                    "rule": "bad_schema",
                    "message": exc.message,
                }
            ],
        ) from exc
    problems = schema_errors(spec.input_schema, input)
    if problems:
        errors = [
            {
                "field": f"input.{path}" if path else "input",
                "rule": rule,
                "message": f"input.{path}: {message}" if path else f"input: {message}",
            }
            for path, rule, message in problems
        ]
        raise InputInvalid("; ".join(e["message"] for e in errors), errors=errors)
