"""Which MCP servers a graph may name, checked at registration and again on the worker.

An agent node's ``mcp_servers`` (``spindle.shared.graphs.node_params.McpServer``)
reach outside Spindle, so a tenant's graph must not choose freely
(docs/operations/threat-model.md):

- a stdio server is a process the worker starts: only a command line the operator
  listed in ``mcp_stdio_commands`` may run, exactly (its arguments included);
- an HTTP server is a URL like a push-notification callback: the outbound URL
  policy (``spindle.shared.platform.outbound``) refuses loopback, private and
  metadata addresses, and no header may replace the connection's own.

The gateway checks a graph when it is registered or started (422 naming the node
and field); the worker checks again before it starts a process or connects, since
the settings may differ and a graph may predate them. Servers a node takes from
``inputs`` (``mcp_servers: input.servers``) are checked at start too, as resolved
against the run's first state (``check_run_mcp_servers``), and always by the
worker, as resolved, before it connects.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from spindle.shared.contracts.errors import GraphInvalid, OutboundRefused
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.expressions import ExpressionError, evaluate
from spindle.shared.graphs.node_params import AgentParams, McpServer
from spindle.shared.graphs.node_types import AGENT
from spindle.shared.platform.outbound import OutboundPolicy


def command_line(server: McpServer) -> list[str]:
    """The stdio server's argv (empty for an HTTP server)."""
    return [server.command, *server.args] if server.command is not None else []


def allowed_commands(entries: Iterable[str]) -> frozenset[tuple[str, ...]]:
    """``mcp_stdio_commands`` as argv tuples (each entry split like a shell would)."""
    return frozenset(tuple(shlex.split(entry)) for entry in entries if entry.strip())


def server_problem(
    server: McpServer, allowed: frozenset[tuple[str, ...]], policy: OutboundPolicy
) -> tuple[str, str] | None:
    """Why ``server`` may not be used: (field, reason), or None when it may.

    Only what needs no network: a URL's host is resolved and checked again at
    every connection (``guarded_client``).
    """
    if server.command is not None:
        if tuple(command_line(server)) not in allowed:
            return (
                "command",
                f"stdio MCP server '{shlex.join(command_line(server))}' is not in the "
                "operator's allow-list (mcp_stdio_commands)",
            )
        return None
    assert server.url is not None
    try:
        policy.check_url(server.url)
        plain = {k: v for k, v in server.headers.items() if isinstance(v, str)}
        policy.check_headers({**plain, **dict.fromkeys(server.headers, "")})
    except OutboundRefused as exc:
        field = "headers" if "header" in exc.detail else "url"
        return field, exc.detail
    return None


def check_graph_mcp_servers(
    spec: GraphSpec, *, stdio_commands: Iterable[str], policy: OutboundPolicy
) -> None:
    """Refuse a graph whose agent nodes name an MCP server they may not use.

    Raises:
        GraphInvalid: naming the node and ``params.mcp_servers[i].<field>``.
    """
    allowed = allowed_commands(stdio_commands)
    errors = []
    for node in spec.nodes:
        if node.type != AGENT.name or not node.params.get("mcp_servers"):
            continue
        try:
            params = AgentParams.model_validate(node.params)
        except ValueError:
            continue  # validate_graph reports malformed params, naming the field
        for index, server in enumerate(params.mcp_servers):
            problem = server_problem(server, allowed, policy)
            if problem is not None:
                field, reason = problem
                errors.append(
                    {
                        "node": node.id,
                        "field": f"params.mcp_servers[{index}].{field}",
                        "rule": "mcp_server_refused",
                        "message": reason,
                    }
                )
    if errors:
        raise GraphInvalid(
            f"graph '{spec.name}': node '{errors[0]['node']}': {errors[0]['message']}",
            errors=errors,
        )


def check_run_mcp_servers(
    spec: GraphSpec,
    state: dict[str, Any],
    *,
    stdio_commands: Iterable[str],
    policy: OutboundPolicy,
) -> None:
    """Refuse a start whose ``inputs`` give an agent node servers it may not use.

    ``state`` is the run's first state (``input``, ``context``, ``meta``). An
    expression that reads later state (null now) or fails is left to the worker,
    which checks every server as resolved before it connects.

    Raises:
        GraphInvalid: naming the node and ``inputs.mcp_servers[i].<field>``.
    """
    allowed = allowed_commands(stdio_commands)
    errors = []
    for node in spec.nodes:
        expression = node.inputs.get("mcp_servers")
        if node.type != AGENT.name or expression is None:
            continue
        try:
            value = evaluate(expression, state)
        except ExpressionError:
            continue
        for index, raw in enumerate(value if isinstance(value, list) else []):
            try:
                server = McpServer.model_validate(raw)
            except ValidationError:
                continue  # the worker refuses a malformed server, naming it
            problem = server_problem(server, allowed, policy)
            if problem is not None:
                errors.append(
                    {
                        "node": node.id,
                        "field": f"inputs.mcp_servers[{index}].{problem[0]}",
                        "rule": "mcp_server_refused",
                        "message": problem[1],
                    }
                )
    if errors:
        raise GraphInvalid(
            f"graph '{spec.name}': node '{errors[0]['node']}': {errors[0]['message']}",
            errors=errors,
        )
