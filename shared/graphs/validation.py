"""Validating a graph and a run input against what the workers offer.

The gateway calls these before starting a run, so a broken graph or input is
refused with a 4xx naming the node, field and rule, and no workflow starts.
``spindle.shared.contracts.graph_spec.validate_structure`` checks the shape; this module adds what
needs the catalog: node types, their parameters, tools and templates.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaError
from jsonschema.exceptions import SchemaError as BadSchema
from pydantic import BaseModel, ValidationError

from spindle.shared.contracts.errors import ExecutorNotFound, GraphInvalid, InputInvalid
from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
from spindle.shared.contracts.workstreams import WORKSTREAM_TOOLS
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.expressions import (
    ExpressionError,
    compile_expression,
    template_expressions,
)
from spindle.shared.graphs.node_params import BUILTIN_PARAMS
from spindle.shared.graphs.structure import validate_structure

# Params of built-in types rendered as ``{{ expr }}`` templates at run time.
TEMPLATE_PARAMS: dict[str, tuple[str, ...]] = {
    "agent": ("instructions", "prompt"),
    "tool": ("args",),
    "prompt": ("prompt", "title"),
    "output": ("message",),
    "workstream": ("task", "label"),
}
# Params of built-in types that are JMESPath expressions.
EXPRESSION_PARAMS: dict[str, tuple[str, ...]] = {"output": ("select",)}

Error = dict[str, Any]


def _error(node: str | None, field: str | None, rule: str, message: str) -> Error:
    where = f"node '{node}': " if node else ""
    at = f"{field}: " if field else ""
    return {"node": node, "field": field, "rule": rule, "message": f"{where}{at}{message}"}


def _json_path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def _schema_errors(
    schema: dict[str, Any], value: Any, *, skip: Collection[str] = ()
) -> list[tuple[str, str, str]]:
    """(field path, rule, message) of each violation, except under ``skip`` fields.

    A ``required`` violation is reported at the missing property's own path.
    """
    out = []
    validator = Draft202012Validator(schema)
    for err in sorted(
        validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]
    ):
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = _missing_property(err)
            if missing is not None:
                path.append(missing)
        if path and str(path[0]) in skip:
            continue
        out.append((_json_path(path), str(err.validator), err.message))
    return out


def _missing_property(err: SchemaError) -> str | None:
    # jsonschema's message is "'name' is a required property".
    message = err.message
    if message.startswith("'") and "' is a required property" in message:
        return message[1 : message.index("' is a required property")]
    return None


def _check_params_model(node: NodeSpec, model: type[BaseModel]) -> list[Error]:
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
            errors.append(_error(node.id, field, e["type"], e["msg"]))
        return errors
    return []


def _check_params_schema(node: NodeSpec, schema: dict[str, Any]) -> list[Error]:
    if not schema:
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except BadSchema:
        return []  # a worker published a broken schema: nothing to check against
    return [
        _error(node.id, f"params.{path}" if path else "params", rule, message)
        for path, rule, message in _schema_errors(schema, node.params, skip=set(node.inputs))
    ]


def _strings(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, str):
        return [(path, value)]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{path}.{k}")]
    return []


def _check_expressions(node: NodeSpec) -> list[Error]:
    errors = []
    for name in TEMPLATE_PARAMS.get(node.type, ()):
        if name in node.inputs or name not in node.params:
            continue
        for path, text in _strings(node.params[name], f"params.{name}"):
            try:
                for expression in template_expressions(text):
                    compile_expression(expression)
            except ExpressionError as exc:
                errors.append(_error(node.id, path, "bad_template", str(exc)))
    for name in EXPRESSION_PARAMS.get(node.type, ()):
        value = node.params.get(name)
        if isinstance(value, str) and name not in node.inputs:
            try:
                compile_expression(value)
            except ExpressionError as exc:
                errors.append(_error(node.id, f"params.{name}", "bad_expression", str(exc)))
    if node.type == "router" and "routes" not in node.inputs:
        for i, route in enumerate(node.params.get("routes") or []):
            if isinstance(route, dict) and isinstance(route.get("when"), str):
                try:
                    compile_expression(route["when"])
                except ExpressionError as exc:
                    field = f"params.routes[{i}].when"
                    errors.append(_error(node.id, field, "bad_condition", str(exc)))
    if node.type == "prompt" and isinstance(node.params.get("ui_schema"), dict):
        try:
            Draft202012Validator.check_schema(node.params["ui_schema"])
        except BadSchema as exc:
            errors.append(_error(node.id, "params.ui_schema", "bad_schema", exc.message))
    return errors


def _check_tools(node: NodeSpec, catalog: Catalog) -> list[Error]:
    if not catalog.tools_known:
        return []
    errors = []
    if node.type == "tool" and "tool" not in node.inputs:
        name = node.params.get("tool")
        if isinstance(name, str) and name:
            info = catalog.tools.get(name)
            if info is None:
                errors.append(_unknown_tool(node, "params.tool", name, catalog))
            elif "args" not in node.inputs and isinstance(node.params.get("args", {}), dict):
                errors.extend(_check_tool_args(node, info.params_schema))
    if node.type == "agent" and "tools" not in node.inputs:
        tools = node.params.get("tools") or []
        for i, name in enumerate(tools if isinstance(tools, list) else []):
            # The workstream tools are answered by the workflow, not by a worker tool.
            if isinstance(name, str) and name not in catalog.tools and name not in WORKSTREAM_TOOLS:
                errors.append(_unknown_tool(node, f"params.tools[{i}]", name, catalog))
    return errors


def _unknown_tool(node: NodeSpec, field: str, name: str, catalog: Catalog) -> Error:
    known = ", ".join(sorted(catalog.tools)) or "none"
    return _error(node.id, field, "unknown_tool", f"unknown tool '{name}' (known: {known})")


def _check_tool_args(node: NodeSpec, schema: dict[str, Any]) -> list[Error]:
    args = node.params.get("args") or {}
    # Template strings render at run time to values we cannot type-check now.
    templated = {k for k, v in args.items() if isinstance(v, str) and "{{" in v}
    errors = []
    for path, rule, message in _schema_errors(schema, args):
        if path.split(".", 1)[0].split("[", 1)[0] in templated:
            continue
        field = f"params.args.{path}" if path else "params.args"
        errors.append(_error(node.id, field, rule, message))
    return errors


def _check_router_ports(spec: GraphSpec, node: NodeSpec) -> list[Error]:
    if node.type != "router" or "routes" in node.inputs or "default" in node.inputs:
        return []
    ports = {r.get("port") for r in node.params.get("routes") or [] if isinstance(r, dict)}
    ports.add(node.params.get("default"))
    return [
        _error(
            node.id,
            None,
            "unknown_port",
            f"edge {edge.from_} → {edge.to} uses port '{edge.from_port}' that no route "
            f"of this router produces",
        )
        for edge in spec.outgoing(node.id)
        if edge.from_port is not None and edge.from_port not in ports
    ]


def _check_routing(spec: GraphSpec, known_types: Collection[str]) -> list[Error]:
    """``task_queues`` names only known node types; a local node takes no queue."""
    errors = [
        _error(
            None,
            f"task_queues.{node_type}",
            "unknown_node_type",
            f"unknown node type '{node_type}' (known: {', '.join(sorted(known_types))})",
        )
        for node_type in spec.task_queues
        if node_type not in known_types
    ]
    errors.extend(
        _error(
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


def validate_graph(spec: GraphSpec, catalog: Catalog) -> None:
    """Check a graph completely before a run starts.

    Structure first (``validate_structure``), then per node: the type is known;
    the params are valid (pydantic models of the built-ins, the published JSON
    Schema of other types; params supplied by ``inputs`` are not required);
    templates and expressions compile; tools exist (when the catalog knows them);
    router ports used by edges exist. Routing: ``task_queues`` maps known node
    types only, and no local node names a task queue.

    Raises:
        GraphInvalid: structure or parameters are wrong; ``errors`` names each
            node, field and rule.
        ExecutorNotFound: a node's type is unknown (``errors`` names every problem).
    """
    validate_structure(spec)
    catalog = Catalog.builtin().merged(catalog)
    errors: list[Error] = _check_routing(spec, catalog.node_types)
    unknown = False
    for node in spec.nodes:
        model = BUILTIN_PARAMS.get(node.type)
        if model is not None:
            errors.extend(_check_params_model(node, model))
        elif node.type in catalog.node_types:
            errors.extend(_check_params_schema(node, catalog.node_types[node.type].params_schema))
        else:
            unknown = True
            known = ", ".join(sorted(catalog.node_types))
            errors.append(
                _error(
                    node.id,
                    "type",
                    "unknown_node_type",
                    f"unknown node type '{node.type}' (known: {known})",
                )
            )
            continue
        errors.extend(_check_expressions(node))
        errors.extend(_check_tools(node, catalog))
        errors.extend(_check_router_ports(spec, node))
    if errors:
        detail = "; ".join(e["message"] for e in errors)
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
    problems = _schema_errors(spec.input_schema, input)
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
