"""``GET /tools?graph=``'s MCP listing (``gateway.services.mcp_tools``) under the
worker's rules: an allow-listed stdio server and an HTTP server the outbound policy
lets through are listed with their tools; a command not allow-listed, an address the
policy refuses, a server that hangs, one that is down and a secret the gateway does
not hold are each reported with why, never raised. Real MCP servers
(``tests/mcp_echo_server.py``, the official SDK on both sides)."""

from __future__ import annotations

import shlex
import sys
from typing import Any

import pytest

from spindle.dev.processes import free_port
from spindle.gateway.services.mcp_tools import McpToolLister
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.platform.settings import Settings
from tests.integration.test_mcp_isolation import LOOPBACK, SERVER, broken_server, echo_server

pytestmark = pytest.mark.integration

STDIO = [sys.executable, str(SERVER)]


def graph(*servers: dict[str, Any], dynamic: bool = False) -> GraphSpec:
    nodes: list[dict[str, Any]] = [
        {"id": "agent", "type": "agent", "params": {"mcp_servers": list(servers)}}
    ]
    if dynamic:
        nodes.append({"id": "picker", "type": "agent", "inputs": {"mcp_servers": "input.servers"}})
    return GraphSpec.model_validate({"name": "g", "entry": "agent", "nodes": nodes, "edges": []})


def lister(settings: Settings, **update: Any) -> McpToolLister:
    return McpToolLister(settings.model_copy(update={"mcp_tools_cache_seconds": 0, **update}))


async def test_stdio_and_http_servers_are_listed_with_their_tools(settings: Settings) -> None:
    port = free_port()
    async with echo_server(port) as url:
        listing = await lister(
            settings, mcp_stdio_commands=[shlex.join(STDIO)], outbound_allow=LOOPBACK
        ).listing(
            graph(
                {"name": "local", "command": STDIO[0], "args": STDIO[1:]},
                {"name": "remote", "url": url, "tools": ["add"]},
                dynamic=True,
            )
        )
    names = [tool.name for tool in listing.tools]
    assert names == ["local__add", "local__shout", "local__whoami", "remote__add"]
    shout = next(t for t in listing.tools if t.name == "local__shout")
    assert shout.source == "mcp" and shout.server == "local" and shout.nodes == ["agent"]
    assert shout.description == "Repeat the text in capitals."
    assert shout.params_schema["properties"]["text"]["type"] == "string"
    by_name = {s.name: s for s in listing.servers}
    assert by_name["local"].reachable and by_name["local"].tools == 3
    assert by_name["local"].transport == "stdio"
    assert by_name["remote"].reachable and by_name["remote"].tools == 1
    assert by_name["remote"].target == url
    assert listing.dynamic_nodes == ["picker"]


async def test_servers_that_cannot_be_used_are_reported(settings: Settings) -> None:
    port = free_port()
    async with echo_server(port) as url, broken_server(hang=True) as (hanging, _):
        listing = await lister(
            settings, outbound_allow="", mcp_stdio_commands=[], mcp_list_timeout_seconds=1.5
        ).listing(
            graph(
                {"name": "local", "command": STDIO[0], "args": STDIO[1:]},
                {"name": "loopback", "url": url},
            )
        )
        assert listing.tools == []
        errors = {s.name: s.error or "" for s in listing.servers}
        assert all(not s.reachable for s in listing.servers)
        assert "mcp_stdio_commands" in errors["local"]
        assert (
            "127.0.0.1 is a loopback address (see the outbound_allow setting)" in errors["loopback"]
        )

        allowed = lister(settings, outbound_allow=LOOPBACK, mcp_list_timeout_seconds=1.5)
        down = free_port()
        listing = await allowed.listing(
            graph(
                {"name": "hangs", "url": f"http://127.0.0.1:{hanging}/mcp"},
                {"name": "down", "url": f"http://127.0.0.1:{down}/mcp"},
                {"name": "secret", "url": url, "headers": {"Authorization": {"secret": "NOPE_X"}}},
            )
        )
    errors = {s.name: s.error or "" for s in listing.servers}
    assert "did not answer within 1.5 s" in errors["hangs"]
    assert "cannot be reached" in errors["down"]
    assert "SPINDLE_MCP_SECRET_NOPE_X" in errors["secret"]
    assert listing.tools == []
