"""The tools of a graph's MCP servers, for ``GET /tools?graph=`` (docs/graphs/tools.md).

The gateway imports no worker code, so it lists the servers itself, under the same
rules the worker applies before it connects (docs/protocols/outbound.md,
docs/operations/threat-model.md):

- a stdio server runs only if its exact command line is in ``mcp_stdio_commands``
  (set it on the gateway too for its stdio servers to be listed);
- an HTTP server goes through the outbound URL policy (``guarded_client2``: every
  address checked at connect time, no redirects, no proxies from the environment)
  and a per-destination gate (``mcp_per_destination`` calls in flight per host
  and port; a breaker after ``mcp_breaker_failures`` failed connections in a row,
  for ``mcp_breaker_seconds``);
- a header given as ``{secret: NAME}`` is read from ``SPINDLE_MCP_SECRET_<NAME>``
  in the gateway's environment; a server whose secret is not set is reported, not
  called.

Each server gets at most ``mcp_list_timeout_seconds``; one that cannot be used or
reached is reported in the answer with why, never as an error of the request.
Lists are reused for ``mcp_tools_cache_seconds`` per server definition (failures
are not kept).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Literal

import orjson
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from pydantic import BaseModel, Field

from spindle.shared.contracts.errors import OutboundRefused
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import ToolInfo
from spindle.shared.graphs.node_params import AgentParams, McpSecret, McpServer
from spindle.shared.graphs.node_types import AGENT
from spindle.shared.platform.destinations import (
    DestinationGate,
    DestinationHeld,
    GateLimits,
    destination_of,
)
from spindle.shared.platform.mcp_servers import allowed_commands, command_line, server_problem
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.platform.outbound_httpx2 import guarded_client2
from spindle.shared.platform.settings import Settings

SEPARATOR = "__"  # as the model sees an MCP tool: <server>__<tool>
SECRET_ENV_PREFIX = "SPINDLE_MCP_SECRET_"


class ListedTool(ToolInfo):
    """A tool in ``GET /tools``: an MCP tool also names its server and the nodes offering it."""

    server: str | None = Field(None, description="the MCP server (source mcp); null otherwise")
    nodes: list[str] = Field(
        default_factory=list, description="the agent nodes that offer it (source mcp)"
    )


class McpServerStatus(BaseModel):
    """One MCP server of the graph, and whether its tools could be listed."""

    name: str = Field(description="the server's name: the prefix of its tools' names")
    nodes: list[str] = Field(description="the agent nodes that offer its tools")
    transport: Literal["stdio", "http"]
    target: str = Field(description="the stdio command line, or the URL without its query")
    reachable: bool = Field(description="whether its tools were listed")
    error: str | None = Field(None, description="why not, when not reachable")
    tools: int = Field(0, description="how many of its tools the nodes offer")


class McpToolListing(BaseModel):
    """The MCP tools of one graph and the state of each of its servers."""

    tools: list[ListedTool] = Field(default_factory=list)
    servers: list[McpServerStatus] = Field(default_factory=list)
    dynamic_nodes: list[str] = Field(
        default_factory=list,
        description="agent nodes whose MCP servers come from inputs: known only when run",
    )


def _key(server: McpServer) -> str:
    # Secrets by name, not value.
    return orjson.dumps(server.model_dump(), option=orjson.OPT_SORT_KEYS).decode()


def _target(server: McpServer) -> str:
    if server.command is not None:
        return " ".join(command_line(server))
    assert server.url is not None
    return server.url.split("?", 1)[0].split("#", 1)[0]


class _Unusable(Exception):
    """A server this side will not or could not call (its message says why)."""


def _header_value(value: str | McpSecret) -> str:
    if isinstance(value, str):
        return value
    secret = os.environ.get(SECRET_ENV_PREFIX + value.secret)
    if secret is None:
        raise _Unusable(
            f"secret '{value.secret}' is not set on the gateway "
            f"(environment variable {SECRET_ENV_PREFIX}{value.secret})"
        )
    return value.prefix + secret


def graph_servers(spec: GraphSpec) -> tuple[dict[str, tuple[McpServer, list[str]]], list[str]]:
    """The distinct MCP servers of ``spec``'s agent nodes (with the nodes naming each),
    and the agent nodes that take theirs from ``inputs``."""
    servers: dict[str, tuple[McpServer, list[str]]] = {}
    dynamic: list[str] = []
    for node in spec.nodes:
        if node.type != AGENT.name:
            continue
        if "mcp_servers" in node.inputs:
            dynamic.append(node.id)
        try:
            params = AgentParams.model_validate(node.params)
        except ValueError:
            continue  # a registered graph was validated; an old one is left out
        for server in params.mcp_servers:
            servers.setdefault(_key(server), (server, []))[1].append(node.id)
    return servers, dynamic


class McpToolLister:
    """Lists MCP servers' tools for ``GET /tools``; one per gateway process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lists: dict[str, tuple[float, list[dict[str, Any]]]] = {}
        self.gate = DestinationGate(
            GateLimits(
                settings.mcp_per_destination,
                settings.mcp_breaker_failures,
                settings.mcp_breaker_seconds,
            ),
            what="MCP",
        )

    async def listing(self, spec: GraphSpec) -> McpToolListing:
        """Every MCP tool of ``spec``'s agent nodes, each server's state beside."""
        servers, dynamic = graph_servers(spec)
        entries = list(servers.values())
        results = await asyncio.gather(*(self._status(s, nodes) for s, nodes in entries))
        answer = McpToolListing(dynamic_nodes=dynamic)
        for status, tools in results:
            answer.servers.append(status)
            answer.tools.extend(tools)
        answer.tools.sort(key=lambda t: t.name)
        return answer

    async def _status(
        self, server: McpServer, nodes: list[str]
    ) -> tuple[McpServerStatus, list[ListedTool]]:
        status = McpServerStatus(
            name=server.name,
            nodes=nodes,
            transport="stdio" if server.command is not None else "http",
            target=_target(server),
            reachable=False,
        )
        try:
            listed = await self._tools(server)
        except _Unusable as exc:
            status.error = str(exc)
            return status, []
        wanted = set(server.tools) if server.tools is not None else None
        tools = [
            ListedTool(
                name=f"{server.name}{SEPARATOR}{tool['name']}",
                description=tool["description"],
                params_schema=tool["params_schema"],
                source="mcp",
                server=server.name,
                nodes=nodes,
            )
            for tool in listed
            if wanted is None or tool["name"] in wanted
        ]
        status.reachable = True
        status.tools = len(tools)
        return status, tools

    async def _tools(self, server: McpServer) -> list[dict[str, Any]]:
        key = _key(server)
        cached = self._lists.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        settings = self.settings
        problem = server_problem(
            server, allowed_commands(settings.mcp_stdio_commands), outbound_policy(settings)
        )
        if problem is not None:
            raise _Unusable(problem[1])
        timeout = settings.mcp_list_timeout_seconds
        if server.url is None:
            listed = await self._attempt(server, seconds=timeout)
        else:
            destination = destination_of(server.url)
            try:
                async with self.gate.slot(destination, wait_seconds=timeout) as call:
                    try:
                        listed = await self._attempt(server, seconds=timeout)
                    except _Unusable as exc:
                        # A refusal by the policy says nothing about the server.
                        call.ok = None if isinstance(exc.__cause__, OutboundRefused) else False
                        raise
            except DestinationHeld as exc:
                raise _Unusable(f"{destination} is not called: {exc.reason}") from exc
        self._lists[key] = (time.monotonic() + settings.mcp_tools_cache_seconds, listed)
        return listed

    async def _attempt(self, server: McpServer, seconds: float) -> list[dict[str, Any]]:
        """The server's tools, or ``_Unusable`` saying why not."""
        http = None
        if server.command is not None:
            client = Client(
                StdioServerParameters(command=server.command, args=list(server.args)),
                read_timeout_seconds=seconds,
            )
        else:
            assert server.url is not None
            headers = {k: _header_value(v) for k, v in server.headers.items()}
            http = guarded_client2(outbound_policy(self.settings), timeout=seconds, headers=headers)
            client = Client(
                streamable_http_client(server.url, http_client=http),
                read_timeout_seconds=seconds,
            )
        try:
            async with asyncio.timeout(seconds), client:
                result = await client.list_tools()
        except TimeoutError:
            raise _Unusable(f"did not answer within {seconds:g} s") from None
        except Exception as exc:  # spawn failures, refused URLs, broken connections
            inner = _innermost(exc)
            if isinstance(inner, OutboundRefused):
                raise _Unusable(inner.detail) from inner
            raise _Unusable(f"cannot be reached: {type(inner).__name__}: {inner}") from exc
        finally:
            if http is not None:
                await http.aclose()
        return [
            {
                "name": tool.name,
                "description": tool.description or "",
                "params_schema": dict(tool.input_schema),
            }
            for tool in result.tools
        ]


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of nested exception groups (task groups wrap errors in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
