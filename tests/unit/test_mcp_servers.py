"""Agent nodes' ``mcp_servers``: their syntax, and which ones a graph may name."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from spindle.shared.contracts.errors import GraphInvalid, ToolError
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.platform.mcp_servers import check_graph_mcp_servers, check_run_mcp_servers
from spindle.shared.platform.outbound import OutboundPolicy
from spindle.worker.tools.mcp_client import McpTool, check_arguments, split_name

ALLOWED = ["npx -y @modelcontextprotocol/server-everything"]


def graph(*servers: dict[str, Any]) -> GraphSpec:
    return GraphSpec.model_validate(
        {
            "name": "g",
            "entry": "a",
            "nodes": [{"id": "a", "type": "agent", "params": {"mcp_servers": list(servers)}}],
        }
    )


def check(spec: GraphSpec, allow: str = "") -> None:
    check_graph_mcp_servers(spec, stdio_commands=ALLOWED, policy=OutboundPolicy.parse(allow))


@pytest.mark.parametrize(
    ("server", "says"),
    [
        ({"name": "x"}, "exactly one of 'command'"),
        ({"name": "x", "command": "a", "url": "https://h/mcp"}, "exactly one of 'command'"),
        ({"name": "x", "url": "https://h/mcp", "args": ["-v"]}, "'args' belong"),
        ({"name": "x", "command": "a", "headers": {"A": "b"}}, "'headers' belong"),
        ({"name": "a_b", "command": "a"}, "should match pattern"),
        ({"name": "x", "url": "https://h", "headers": {"A": {"secret": "lower"}}}, "pattern"),
    ],
)
def test_bad_server_definitions_name_the_problem(server: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        AgentParams.model_validate({"mcp_servers": [server]})


def test_server_names_are_unique_per_agent() -> None:
    server = {"name": "x", "url": "https://h/mcp"}
    with pytest.raises(ValidationError, match="each server needs its own name"):
        AgentParams.model_validate({"mcp_servers": [server, server]})


def test_only_allow_listed_command_lines_may_run() -> None:
    check(
        graph(
            {
                "name": "ok",
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-everything"],
            }
        )
    )
    with pytest.raises(GraphInvalid) as refused:
        check(
            graph(
                {"name": "ok", "url": "https://mcp.example.com/mcp"},
                {"name": "sh", "command": "sh", "args": ["-c", "id"]},
            )
        )
    [error] = refused.value.errors
    assert error["node"] == "a" and error["field"] == "params.mcp_servers[1].command"
    assert "'sh -c id' is not in the operator's allow-list" in error["message"]


def test_urls_and_headers_go_through_the_outbound_policy() -> None:
    with pytest.raises(GraphInvalid) as refused:
        check(
            graph(
                {"name": "meta", "url": "http://169.254.169.254/mcp"},
                {"name": "host", "url": "https://mcp.example.com/mcp", "headers": {"Host": "x"}},
            )
        )
    fields = [e["field"] for e in refused.value.errors]
    assert fields == ["params.mcp_servers[0].url", "params.mcp_servers[1].headers"]
    check(graph({"name": "local", "url": "http://127.0.0.1:9/mcp"}), allow="127.0.0.1/32")


def test_tool_names_and_argument_checks() -> None:
    assert split_name("github__create_issue") == ("github", "create_issue")
    assert split_name("calculator") is None
    tool = McpTool(
        "s",
        "t",
        "",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    check_arguments(tool, {"n": 1})
    with pytest.raises(ToolError, match=r"n: 'x' is not of type 'integer'"):
        check_arguments(tool, {"n": "x"})


@pytest.mark.parametrize(
    "url",
    [
        "http://127\u30020\u30020\u30021/mcp",  # ideographic full stops
        "http://169\uff0e254\uff0e169\uff0e254/mcp",  # fullwidth full stops
        "http://localhost\uff61/mcp",  # halfwidth ideographic full stop
    ],
)
def test_idna_full_stops_do_not_hide_a_refused_host(url: str) -> None:
    # Issue 28 (low): the gateway read "127。0。0。1" as a name, DNS reads it as 127.0.0.1.
    with pytest.raises(GraphInvalid) as refused:
        check(graph({"name": "x", "url": url}))
    assert refused.value.errors[0]["field"] == "params.mcp_servers[0].url"


def test_servers_taken_from_the_input_are_checked_at_start() -> None:
    # Issue 28 (low): `inputs: {mcp_servers: input.servers}` went unchecked until the worker.
    spec = GraphSpec.model_validate(
        {
            "name": "g",
            "entry": "a",
            "nodes": [{"id": "a", "type": "agent", "inputs": {"mcp_servers": "input.servers"}}],
        }
    )
    policy = OutboundPolicy.parse("")
    bad = {"input": {"servers": [{"name": "x", "url": "http://127.0.0.1:9/mcp"}]}}
    with pytest.raises(GraphInvalid) as refused:
        check_run_mcp_servers(spec, bad, stdio_commands=ALLOWED, policy=policy)
    assert refused.value.errors[0]["field"] == "inputs.mcp_servers[0].url"
    shell = {"input": {"servers": [{"name": "x", "command": "sh", "args": ["-c", "id"]}]}}
    with pytest.raises(GraphInvalid):
        check_run_mcp_servers(spec, shell, stdio_commands=ALLOWED, policy=policy)
    fine = {"input": {"servers": [{"name": "x", "url": "https://mcp.example.com/mcp"}]}}
    check_run_mcp_servers(spec, fine, stdio_commands=ALLOWED, policy=policy)
    # Read from later state (null at start): left to the worker, which checks as resolved.
    later = GraphSpec.model_validate(
        {
            "name": "g",
            "entry": "a",
            "nodes": [{"id": "a", "type": "agent", "inputs": {"mcp_servers": "b.servers"}}],
        }
    )
    check_run_mcp_servers(later, {"input": {}}, stdio_commands=ALLOWED, policy=policy)
