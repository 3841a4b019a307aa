"""``GET /tools?graph=<name>``: the worker tools plus the tools of the graph's MCP
servers, each with its server and nodes, and every server reported, reachable or
not (docs/graphs/tools.md). The MCP server is ``tests/mcp_echo_server.py`` over
streamable HTTP on 127.0.0.1 (the e2e stack's outbound_allow)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from spindle.dev.processes import free_port
from tests.integration.test_mcp_isolation import echo_server

pytestmark = pytest.mark.e2e


def mcp_graph(name: str, url: str, down: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "writer",
        "nodes": [
            {
                "id": "writer",
                "type": "agent",
                "params": {
                    "mcp_servers": [{"name": "echo", "url": url}, {"name": "gone", "url": down}]
                },
            },
            {
                "id": "checker",
                "type": "agent",
                "params": {"mcp_servers": [{"name": "echo", "url": url}]},
            },
        ],
        "edges": [{"from": "writer", "to": "checker"}],
    }


async def test_a_graphs_mcp_tools_are_listed_with_their_server(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = f"mcp-tools-{unique}"
    down = f"http://127.0.0.1:{free_port()}/mcp"
    async with echo_server(free_port()) as url:
        registered = await http.put(f"/graphs/{name}", json=mcp_graph(name, url, down))
        assert registered.status_code in (200, 201), registered.text
        reply = await http.get("/tools", params={"graph": name})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["graph"] == name
    mcp = [tool for tool in body["tools"] if tool["source"] == "mcp"]
    assert [tool["name"] for tool in mcp] == ["echo__add", "echo__shout", "echo__whoami"]
    add = mcp[0]
    assert add["server"] == "echo" and add["nodes"] == ["writer", "checker"]
    assert add["description"] == "Add two whole numbers."
    assert set(add["params_schema"]["required"]) == {"a", "b"}
    # The worker tools are still there, before the MCP ones.
    sources = [tool["source"] for tool in body["tools"]]
    assert "builtin" in sources and sources.index("builtin") < sources.index("mcp")

    servers = {server["name"]: server for server in body["mcp_servers"]}
    assert servers["echo"]["reachable"] is True and servers["echo"]["tools"] == 3
    gone = servers["gone"]
    assert gone["reachable"] is False and gone["tools"] == 0
    assert gone["error"].startswith("cannot be reached"), gone
    assert gone["target"] == down and gone["nodes"] == ["writer"]

    plain = (await http.get("/tools")).json()
    assert plain["graph"] is None and plain["mcp_servers"] == []
    assert all(tool["source"] != "mcp" for tool in plain["tools"])


async def test_an_unknown_graph_is_a_404(http: httpx.AsyncClient, unique: str) -> None:
    reply = await http.get("/tools", params={"graph": f"nope-{unique}"})
    assert reply.status_code == 404, reply.text
    assert reply.json()["detail"] == f"graph 'nope-{unique}' is not registered"
