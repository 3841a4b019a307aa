"""Validation rules that belong to one built-in node type.

Each rule is attached to its type's spec (``NodeTypeSpec.rules``) and run by
``spindle.shared.graphs.validation.validate_graph`` after the generic checks
(params, templates, expressions). A rule skips a param that ``inputs`` supplies:
its value is only known at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as BadSchema

from spindle.shared.contracts.graph_spec import GraphSpec, NodeSpec
from spindle.shared.contracts.workstreams import WORKSTREAM_TOOLS
from spindle.shared.graphs.answers import extra_fields
from spindle.shared.graphs.expressions import ExpressionError, compile_expression
from spindle.shared.graphs.graph_errors import GraphError, graph_error, schema_errors
from spindle.shared.graphs.node_params import default_ui_schema


class ToolSchema(Protocol):
    """A tool as the catalog describes it (``spindle.shared.graphs.catalog.ToolInfo``)."""

    @property
    def params_schema(self) -> dict[str, Any]: ...


class KnownTools(Protocol):
    """The tools the workers offer (``spindle.shared.graphs.catalog.Catalog``)."""

    @property
    def tools_known(self) -> bool: ...

    @property
    def tools(self) -> Mapping[str, ToolSchema]: ...


NodeRule = Callable[[NodeSpec, GraphSpec, KnownTools], list[GraphError]]
"""A type's own check of one node in its graph, given the tools the workers offer."""


def router_conditions(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """Every route's ``when`` compiles as a JMESPath expression."""
    if "routes" in node.inputs:
        return []
    errors = []
    for i, route in enumerate(node.params.get("routes") or []):
        if isinstance(route, dict) and isinstance(route.get("when"), str):
            try:
                compile_expression(route["when"])
            except ExpressionError as exc:
                field = f"params.routes[{i}].when"
                errors.append(graph_error(node.id, field, "bad_condition", str(exc)))
    return errors


def router_ports(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """Every port an outgoing edge names is produced by a route or the default."""
    if "routes" in node.inputs or "default" in node.inputs:
        return []
    ports = {r.get("port") for r in node.params.get("routes") or [] if isinstance(r, dict)}
    ports.add(node.params.get("default"))
    return [
        graph_error(
            node.id,
            None,
            "unknown_port",
            f"edge {edge.from_} → {edge.to} uses port '{edge.from_port}' that no route "
            f"of this router produces",
        )
        for edge in graph.outgoing(node.id)
        if edge.from_port is not None and edge.from_port not in ports
    ]


def prompt_ui_schema(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """A literal ``ui_schema`` is a valid JSON Schema."""
    schema = node.params.get("ui_schema")
    if not isinstance(schema, dict):
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except BadSchema as exc:
        return [graph_error(node.id, "params.ui_schema", "bad_schema", exc.message)]
    return []


def agent_output_schema(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """A literal ``output_schema`` is a valid JSON Schema."""
    schema = node.params.get("output_schema")
    if not isinstance(schema, dict):
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except BadSchema as exc:
        return [graph_error(node.id, "params.output_schema", "bad_schema", exc.message)]
    return []


def prompt_expiry(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """``on_expiry`` comes with ``expires_in_seconds``; an ``{"answer": …}`` fits ``ui_schema``.

    Checked here, when the graph is registered, so that a run never fails (or
    stores an answer no human could give) 30 days in, at expiry.
    """
    on_expiry = node.params.get("on_expiry")
    if on_expiry is None or "on_expiry" in node.inputs:
        return []
    if node.params.get("expires_in_seconds") is None and "expires_in_seconds" not in node.inputs:
        message = "on_expiry needs expires_in_seconds (a prompt without it never expires)"
        return [graph_error(node.id, "params.on_expiry", "requires_expiry", message)]
    answer = on_expiry.get("answer") if isinstance(on_expiry, dict) else None
    if not isinstance(answer, dict) or "ui_schema" in node.inputs:
        return []  # a malformed on_expiry: the params model reports it
    schema = node.params.get("ui_schema")
    if schema is None:
        schema = default_ui_schema(node.id, str(node.params.get("prompt") or ""))
    if not isinstance(schema, dict):
        return []
    try:
        Draft202012Validator.check_schema(schema)
    except BadSchema:
        return []  # prompt_ui_schema reports it
    found = [(e["field"], e["rule"], e["message"]) for e in extra_fields(schema, answer)]
    found += schema_errors(schema, answer)
    return [
        graph_error(
            node.id,
            f"params.on_expiry.answer.{path}" if path else "params.on_expiry.answer",
            rule,
            f"the expiry answer does not fit ui_schema: {message}",
        )
        for path, rule, message in found
    ]


def tool_reference(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """The ``tool`` exists and literal ``args`` fit its schema (when tools are known)."""
    if not tools.tools_known or "tool" in node.inputs:
        return []
    name = node.params.get("tool")
    if not isinstance(name, str) or not name:
        return []
    info = tools.tools.get(name)
    if info is None:
        return [_unknown_tool(node, "params.tool", name, tools)]
    if "args" in node.inputs or not isinstance(node.params.get("args", {}), dict):
        return []
    return _tool_args_errors(node, info.params_schema)


def agent_tools(node: NodeSpec, graph: GraphSpec, tools: KnownTools) -> list[GraphError]:
    """Every name in ``tools`` is a worker tool or a workstream tool (when tools are known)."""
    if not tools.tools_known or "tools" in node.inputs:
        return []
    names = node.params.get("tools") or []
    return [
        _unknown_tool(node, f"params.tools[{i}]", name, tools)
        for i, name in enumerate(names if isinstance(names, list) else [])
        # The workstream tools are answered by the workflow, not by a worker tool.
        if isinstance(name, str) and name not in tools.tools and name not in WORKSTREAM_TOOLS
    ]


def _unknown_tool(node: NodeSpec, field: str, name: str, tools: KnownTools) -> GraphError:
    known = ", ".join(sorted(tools.tools)) or "none"
    return graph_error(node.id, field, "unknown_tool", f"unknown tool '{name}' (known: {known})")


def _tool_args_errors(node: NodeSpec, schema: dict[str, Any]) -> list[GraphError]:
    args = node.params.get("args") or {}
    # Template strings render at run time to values we cannot type-check now.
    templated = {k for k, v in args.items() if isinstance(v, str) and "{{" in v}
    errors = []
    for path, rule, message in schema_errors(schema, args):
        if path.split(".", 1)[0].split("[", 1)[0] in templated:
            continue
        field = f"params.args.{path}" if path else "params.args"
        errors.append(graph_error(node.id, field, rule, message))
    return errors


def item_agent_errors(params: dict[str, Any]) -> list[tuple[str, str]]:
    """What a ``map``'s per-item ``agent`` cannot do, as (param, message) pairs.

    An item's agent is one LLM loop inside its batch activity (docs/graphs/items.md):
    it calls worker tools, but takes no user messages, starts no workstreams and
    calls no MCP servers.
    """
    refused: list[tuple[str, str]] = []
    if params.get("mcp_servers"):
        refused.append(("mcp_servers", "an agent per item calls worker tools only, no MCP servers"))
    if params.get("interactive") is True:
        refused.append(("interactive", "an agent per item takes no user messages"))
    tools = params.get("tools")
    for name in tools if isinstance(tools, list) else []:
        if name in WORKSTREAM_TOOLS:
            message = f"an agent per item starts no workstreams: '{name}' is not offered per item"
            refused.append(("tools", message))
    return refused
