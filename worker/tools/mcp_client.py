"""Tools of MCP servers for ``agent`` nodes (the official ``mcp`` SDK as the client).

An agent node's ``mcp_servers`` name stdio commands or streamable-HTTP URLs
(``spindle.shared.graphs.node_params.McpServer``). The ``llm_turn`` activity offers
their tools to the model as ``<server>__<tool>`` (OpenAI-compatible APIs allow only
``[A-Za-z0-9_-]`` in function names, so no dot); the ``tool_call`` activity calls
one, after validating its arguments against the tool's ``inputSchema``
(docs/graphs/node-types.md, MCP servers).

Each worker process keeps the tool lists it fetched for ``mcp_tools_cache_seconds``
(``McpToolCache``), so a turn does not start a server process or open a
connection just to list tools. Every connection is checked first
(``spindle.shared.platform.mcp_servers``): a stdio command must be allow-listed,
an HTTP server goes through the outbound URL policy (``guarded_client2``) and
its destination's gate (``shared.platform.destinations``: at most
``mcp_per_destination`` calls in flight per host and port, and a breaker that
refuses calls at once after ``mcp_breaker_failures`` failed connections in a
row, for ``mcp_breaker_seconds``), as push notifications and webhooks do.
Header values given as ``{secret: NAME}`` are read here, from the worker's
environment variable ``SPINDLE_MCP_SECRET_<NAME>``: graphs never hold them.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types
import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from spindle.shared.contracts.errors import OutboundRefused, ToolError
from spindle.shared.graphs.node_params import McpSecret, McpServer
from spindle.shared.platform.destinations import (
    DestinationGate,
    DestinationHeld,
    GateLimits,
    destination_of,
)
from spindle.shared.platform.mcp_servers import allowed_commands, server_problem
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.platform.outbound_httpx2 import guarded_client2
from spindle.shared.platform.settings import Settings

SEPARATOR = "__"
SECRET_ENV_PREFIX = "SPINDLE_MCP_SECRET_"


@dataclass(frozen=True)
class McpTool:
    """One tool of one server, as offered to the model."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def qualified(self) -> str:
        return f"{self.server}{SEPARATOR}{self.name}"


def split_name(qualified: str) -> tuple[str, str] | None:
    """(server, tool) of ``<server>__<tool>``; None for a name without the separator."""
    server, sep, tool = qualified.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def _header_value(value: str | McpSecret) -> str:
    if isinstance(value, str):
        return value
    secret = os.environ.get(SECRET_ENV_PREFIX + value.secret)
    if secret is None:
        raise ToolError(
            f"MCP secret '{value.secret}' is not set on this worker "
            f"(environment variable {SECRET_ENV_PREFIX}{value.secret})"
        )
    return value.prefix + secret


def _cache_key(server: McpServer) -> str:
    # Secrets by name, not value: the key may show in logs.
    return orjson.dumps(server.model_dump(), option=orjson.OPT_SORT_KEYS).decode()


class McpToolCache:
    """MCP tool lists per server definition, reused for ``mcp_tools_cache_seconds``.

    One per worker process (``spindle.worker.main.build_workers`` builds it), so
    its per-destination gate counts every call the process makes.

    Args:
        settings: the worker's settings (allow-list, outbound policy, limits).
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._lists: dict[str, tuple[float, list[McpTool]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._gate: DestinationGate | None = None

    def _check(self, server: McpServer) -> None:
        settings = self.settings
        problem = server_problem(
            server, allowed_commands(settings.mcp_stdio_commands), outbound_policy(settings)
        )
        if problem is not None:
            raise ToolError(f"MCP server '{server.name}': {problem[1]}")

    @property
    def gate(self) -> DestinationGate:
        """This worker's per-destination limits and breakers of MCP HTTP servers."""
        if self._gate is None:
            settings = self.settings
            self._gate = DestinationGate(
                GateLimits(
                    settings.mcp_per_destination,
                    settings.mcp_breaker_failures,
                    settings.mcp_breaker_seconds,
                ),
                what="MCP",
            )
        return self._gate

    def _client(self, server: McpServer) -> tuple[Client, Any]:
        """A client of ``server`` and the HTTP client it uses (to close), if any."""
        settings = self.settings
        if server.command is not None:
            params = StdioServerParameters(command=server.command, args=list(server.args))
            return Client(params, read_timeout_seconds=settings.mcp_timeout_seconds), None
        assert server.url is not None
        headers = {k: _header_value(v) for k, v in server.headers.items()}
        http = guarded_client2(
            outbound_policy(settings), timeout=settings.mcp_timeout_seconds, headers=headers
        )
        transport = streamable_http_client(server.url, http_client=http)
        return Client(transport, read_timeout_seconds=settings.mcp_timeout_seconds), http

    async def _session(self, server: McpServer, work: Any) -> Any:
        """Run ``work(client)`` on a fresh connection, bounded by ``mcp_timeout_seconds``.

        An HTTP server's calls also pass its destination's gate (a slot among
        ``mcp_per_destination``, refused while its breaker is open), so one
        tenant's hanging or failing server holds only its own calls.
        """
        self._check(server)
        timeout = self.settings.mcp_timeout_seconds
        deadline = asyncio.get_running_loop().time() + timeout
        if server.url is None:
            return _outcome(server, await self._attempt(server, work, deadline))
        destination = destination_of(server.url)
        try:
            async with self.gate.slot(destination, wait_seconds=timeout) as call:
                attempt = await self._attempt(server, work, deadline)
                if isinstance(attempt, _Unreachable):
                    # A refusal by the policy says nothing about the server.
                    call.ok = None if attempt.refused else False
        except DestinationHeld as exc:
            raise ToolError(
                f"MCP server '{server.name}' at {destination} is not called: {exc.reason}"
            ) from exc
        return _outcome(server, attempt)

    async def _attempt(self, server: McpServer, work: Any, deadline: float) -> Any:
        """``work``'s result, the server's ``MCPError``, or ``_Unreachable``.

        Raises:
            ToolError: a problem on this side (a secret not set on the worker).
        """
        client, http = self._client(server)
        try:
            async with asyncio.timeout_at(deadline):
                async with client:
                    return await work(client)
        except MCPError as exc:
            return exc  # the server answered: not a failure of the destination
        except TimeoutError:
            return _Unreachable("did not answer in time")
        except OutboundRefused as exc:
            return _Unreachable(exc.detail, refused=True)
        except Exception as exc:  # spawn failures, refused URLs, broken connections
            refused = _innermost(exc)
            if isinstance(refused, OutboundRefused):
                return _Unreachable(refused.detail, refused=True)
            return _Unreachable(f"failed: {_reason(exc)}")
        finally:
            if http is not None:
                await http.aclose()

    async def tools(self, server: McpServer) -> list[McpTool]:
        """The server's tools (filtered by ``server.tools``), from the cache when fresh.

        Raises:
            ToolError: the server may not be used, or listing failed.
        """
        key = _cache_key(server)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one listing per server at a time, the rest reuse it
            cached = self._lists.get(key)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]

            async def listing(client: Client) -> list[mcp_types.Tool]:
                return list((await client.list_tools()).tools)

            listed = await self._session(server, listing)
            wanted = set(server.tools) if server.tools is not None else None
            tools = [
                McpTool(server.name, t.name, t.description or "", dict(t.input_schema))
                for t in listed
                if wanted is None or t.name in wanted
            ]
            self._lists[key] = (time.monotonic() + self.settings.mcp_tools_cache_seconds, tools)
            return tools

    async def find(self, servers: list[McpServer], qualified: str) -> tuple[McpServer, McpTool]:
        """The server and tool behind ``<server>__<tool>``.

        Raises:
            ToolError: no such server in the node, or no such tool on it.
        """
        parts = split_name(qualified)
        server = next((s for s in servers if parts and s.name == parts[0]), None)
        if parts is None or server is None:
            raise ToolError(f"tool '{qualified}' is not offered to this agent")
        for tool in await self.tools(server):
            if tool.name == parts[1]:
                return server, tool
        raise ToolError(f"MCP server '{server.name}' has no tool '{parts[1]}'")

    async def call(self, servers: list[McpServer], qualified: str, arguments: Any) -> Any:
        """Validate ``arguments`` against the tool's ``inputSchema``, then call it.

        Returns:
            The structured result if the server gave one, else its text content.

        Raises:
            ToolError: bad arguments (naming each problem), the server's own tool
                error, or a failed connection.
        """
        server, tool = await self.find(servers, qualified)
        args = arguments if isinstance(arguments, dict) else {}
        check_arguments(tool, args)

        async def calling(client: Client) -> mcp_types.CallToolResult:
            return await client.call_tool(tool.name, args)

        result: mcp_types.CallToolResult = await self._session(server, calling)
        text = "\n".join(c.text for c in result.content if isinstance(c, mcp_types.TextContent))
        if result.is_error:
            raise ToolError(f"MCP tool '{qualified}' failed: {text or 'no details'}")
        if result.structured_content is not None:
            return result.structured_content
        return text


def check_arguments(tool: McpTool, arguments: Mapping[str, Any]) -> None:
    """Raises ``ToolError`` naming each argument that breaks the tool's ``inputSchema``."""
    try:
        validator = Draft202012Validator(tool.input_schema)
        problems = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.path))
    except SchemaError as exc:
        raise ToolError(f"MCP tool '{tool.qualified}' has an invalid inputSchema") from exc
    if problems:
        listed = "; ".join(
            f"{'.'.join(str(p) for p in e.path) or '(arguments)'}: {e.message}" for e in problems
        )
        raise ToolError(f"invalid arguments for tool '{tool.qualified}': {listed}")


@dataclass(frozen=True)
class _Unreachable:
    """Why a connection to a server failed (a failure of its destination)."""

    reason: str
    refused: bool = False


def _outcome(server: McpServer, attempt: Any) -> Any:
    """``attempt``'s value, or the ``ToolError`` its failure makes."""
    if isinstance(attempt, MCPError):
        raise ToolError(f"MCP server '{server.name}': {attempt}") from attempt
    if isinstance(attempt, _Unreachable):
        if attempt.refused:
            raise ToolError(f"MCP server '{server.name}': {attempt.reason}")
        raise ToolError(f"MCP server '{server.name}' {attempt.reason}")
    return attempt


def _innermost(exc: BaseException) -> BaseException:
    """The first leaf of nested exception groups (task groups wrap errors in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """The innermost useful message."""
    inner = _innermost(exc)
    return f"{type(inner).__name__}: {inner}"
