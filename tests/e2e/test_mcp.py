"""Spindle as an MCP server at ``/mcp``, called with the official ``mcp`` SDK's client.

Each registered graph of the caller's tenant is a tool whose input schema is the
graph's; a call starts a run, reports its progress and returns its output; a HITL
prompt comes to the client as an elicitation (docs/protocols/mcp.md). Both ways of
asking are covered: the 2026-07-28 protocol's ``InputRequiredResult`` (the SDK's
default ``auto`` mode) and an ``elicitation/create`` request on a legacy session.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import Caller, SpindleStack, example_graph

pytestmark = pytest.mark.e2e


@asynccontextmanager
async def mcp_client(stack: SpindleStack, caller: Caller, **options: Any) -> AsyncIterator[Client]:
    async with httpx2.AsyncClient(headers=caller.headers, timeout=60) as http:
        transport = streamable_http_client(f"{stack.base_url}/mcp", http_client=http)
        async with Client(transport, **options) as client:
            yield client


def run_of(result: types.CallToolResult) -> str:
    assert result.meta is not None
    run = result.meta["spindle/run"]
    assert isinstance(run, str)
    return run


async def test_each_registered_graph_is_a_tool_of_its_own_tenant_only(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with mcp_client(stack, callers["alice"]) as alice:
        tools = {t.name: t for t in (await alice.list_tools()).tools}
    assert set(examples) <= set(tools)
    assert tools["approval-flow"].input_schema == example_graph("approval-flow")["input_schema"]

    # A graph only alice's tenant has (a shared name such as approval-flow may be
    # registered by the other tenant too: the tenant matrix test registers one).
    private = {**example_graph("approval-flow"), "name": f"alice-only-{uuid.uuid4().hex[:8]}"}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=callers["alice"].headers) as a:
        put = await a.put(f"/graphs/{private['name']}", json=private)
        assert put.status_code in (200, 201), put.text
    async with mcp_client(stack, callers["alice"]) as alice:
        assert private["name"] in {t.name for t in (await alice.list_tools()).tools}
    async with mcp_client(stack, callers["mallory"]) as mallory:
        assert private["name"] not in {t.name for t in (await mallory.list_tools()).tools}
        with pytest.raises(MCPError) as refused:
            await mallory.call_tool(private["name"], {"topic": "theirs"})
    assert refused.value.code == types.INVALID_PARAMS
    assert f"unknown tool '{private['name']}'" in refused.value.message


async def test_a_call_runs_the_graph_reports_progress_and_returns_its_output(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], http: httpx.AsyncClient
) -> None:
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async with mcp_client(stack, callers["alice"]) as client:
        result = await client.call_tool(
            "pipeline", {"text": "The outage is terrible, customers are angry"}, None, on_progress
        )
    assert not result.is_error, result
    run = await http.get(f"/runs/{run_of(result)}")
    assert run.json()["status"] == "completed"
    assert result.structured_content == run.json()["output"]
    assert progress, "no progress notification arrived"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_prompt_in_the_run_becomes_an_elicitation(
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    http: httpx.AsyncClient,
    mode: str,
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async with mcp_client(stack, callers["alice"], elicitation_callback=answer, mode=mode) as c:
        result = await c.call_tool("approval-flow", {"topic": f"mcp {mode}"})
    assert not result.is_error, result
    [prompt] = asked
    assert isinstance(prompt, types.ElicitRequestFormParams)
    assert prompt.message.startswith("Approve or reject the draft")
    assert prompt.requested_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert result.structured_content is not None
    assert result.structured_content["decision"] == "approve"
    run = (await http.get(f"/runs/{run_of(result)}")).json()
    assert run["status"] == "completed" and run["output"]["decision"] == "approve"


async def test_bad_arguments_are_a_tool_error_and_start_nothing(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient, unique: str
) -> None:
    # MCP 2025-11-25 (SEP-1303): input validation errors are tool execution errors
    # (isError) the model can correct; an unknown tool stays a protocol error.
    graph = {**example_graph("approval-flow"), "name": f"mcp-args-{unique}"}
    put = await http.put(f"/graphs/{graph['name']}", json=graph)
    assert put.status_code in (200, 201), put.text
    async with mcp_client(stack, callers["alice"]) as client:
        bad = await client.call_tool(graph["name"], {"audience": "team"})
        wrong_type = await client.call_tool(graph["name"], {"topic": 42})
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no-such-graph", {})
    assert bad.is_error and wrong_type.is_error
    [text] = bad.content
    assert isinstance(text, types.TextContent)
    assert f"invalid arguments for tool '{graph['name']}'" in text.text and "topic" in text.text
    [text] = wrong_type.content
    assert isinstance(text, types.TextContent) and "topic" in text.text
    assert bad.meta is not None and bad.meta["spindle/errors"], bad.meta
    assert unknown.value.code == types.INVALID_PARAMS
    assert "unknown tool 'no-such-graph'" in unknown.value.message
    listed = await http.get("/runs", params={"graph": graph["name"]})
    assert listed.json()["total"] == 0  # no run started


async def test_a_graph_may_name_only_allowed_mcp_servers(
    http: httpx.AsyncClient, unique: str
) -> None:
    spec = {
        "entry": "a",
        "nodes": [
            {
                "id": "a",
                "type": "agent",
                "params": {
                    "mcp_servers": [
                        {"name": "shell", "command": "sh", "args": ["-c", "cat /etc/passwd"]},
                        {"name": "meta", "url": "http://169.254.169.254/latest/mcp"},
                    ]
                },
            }
        ],
    }
    reply = await http.put(f"/graphs/mcp-{unique}", json=spec)
    assert reply.status_code == 422, reply.text
    fields = [(e["node"], e["field"]) for e in reply.json()["errors"]]
    assert fields == [("a", "params.mcp_servers[0].command"), ("a", "params.mcp_servers[1].url")]
    assert (await http.get(f"/graphs/mcp-{unique}")).status_code == 404


async def test_a_declined_elicitation_is_an_error_and_the_run_keeps_waiting(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], http: httpx.AsyncClient
) -> None:
    async def decline(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with mcp_client(stack, callers["alice"], elicitation_callback=decline) as client:
        with pytest.raises(MCPError) as declined:
            await client.call_tool("approval-flow", {"topic": "declined"})
    assert declined.value.code == types.INVALID_PARAMS
    assert "keeps waiting" in declined.value.message
    workflow_id = declined.value.message.split("run '")[1].split("'")[0]
    run = (await http.get(f"/runs/{workflow_id}")).json()
    assert run["status"] == "paused" and run["pending_input"]["node_id"] == "review"
    await http.post(f"/runs/{workflow_id}/cancel")
