"""Agent nodes using MCP servers' tools: real servers (the official SDK) over stdio and HTTP.

The ``llm_turn`` and ``tool_call`` activities run in ``ActivityEnvironment`` with the
offline model, which calls every offered tool whose required parameters it can fill
from the prompt; the MCP server is ``tests/mcp_echo_server.py``, started by the
worker-side client (stdio) or by the test (streamable HTTP on loopback, let through
the outbound policy by ``outbound_allow``).
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.platform.settings import Settings
from spindle.worker.activities.agent import AgentActivities, tool_message
from spindle.worker.contracts import LlmTurnInput, NodeExecution, RunRef, ToolCall, ToolCallInput
from spindle.worker.llm.offline import OfflineProvider
from tests.integration.activity_env import env
from tests.polling import eventually

pytestmark = pytest.mark.integration

SERVER = Path(__file__).resolve().parents[1] / "mcp_echo_server.py"


@pytest.fixture
async def bus(redis_url: str) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(Settings(redis_url=redis_url))
    yield bus
    await bus.close()


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """The echo server over streamable HTTP on 127.0.0.1; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def up() -> bool:
        try:
            httpx.get(url, timeout=1)
        except httpx.HTTPError:
            return False
        return True

    try:
        await eventually(up, what="the MCP server listening", timeout=30)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def execution(node_params: dict[str, Any], prompt: str) -> NodeExecution:
    wf = f"mcp-{uuid.uuid4().hex[:12]}"
    return NodeExecution(
        run=RunRef(workflow_id=wf, run_id="run-1", stream_id=wf, graph_name="g"),
        node=NodeSpec.model_validate({"id": "agent", "type": "agent", "params": node_params}),
        state={"input": {"q": prompt}, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


async def call(acts: AgentActivities, ex: NodeExecution, name: str, args: Any) -> Any:
    result = await env(f"agent.1.t1.{name}").run(
        acts.tool_call,
        ToolCallInput(execution=ex, turn=1, call=ToolCall(id="c1", name=name, arguments=args)),
    )
    return result.ok, orjson.loads(result.content)


async def test_an_agent_calls_a_stdio_mcp_tool_listed_once_per_worker(
    bus: MessageBus, tmp_path: Path
) -> None:
    log = tmp_path / "starts.log"
    command = [sys.executable, str(SERVER), "--log", str(log)]
    settings = Settings(mcp_stdio_commands=[shlex.join(command)])
    acts = AgentActivities(bus, None, OfflineProvider(), settings=settings)
    server = {"name": "echo", "command": command[0], "args": command[1:], "tools": ["shout"]}
    ex = execution({"prompt": "{{ input.q }}", "mcp_servers": [server]}, "hello mcp")

    first = await env("agent.1.t1").run(
        acts.llm_turn, LlmTurnInput(execution=ex, turn=1, messages=[])
    )
    [asked] = first.message.tool_calls
    assert asked.name == "echo__shout" and asked.arguments == {"text": "hello mcp"}
    result = await env(f"agent.1.t1.{asked.id}").run(
        acts.tool_call, ToolCallInput(execution=ex, turn=1, call=asked)
    )
    assert result.ok and orjson.loads(result.content) == {"result": "HELLO MCP"}
    second = await env("agent.1.t2").run(
        acts.llm_turn,
        LlmTurnInput(execution=ex, turn=2, messages=[first.message, tool_message(result)]),
    )
    assert second.final and "HELLO MCP" in (second.message.content or "")
    # One process listed the tools, one ran the call: the second turn used the cache.
    assert log.read_text().splitlines() == ["started", "started"]


async def test_mcp_arguments_are_checked_against_the_tool_schema(
    bus: MessageBus, tmp_path: Path
) -> None:
    command = [sys.executable, str(SERVER)]
    settings = Settings(mcp_stdio_commands=[shlex.join(command)])
    acts = AgentActivities(bus, None, OfflineProvider(), settings=settings)
    server = {"name": "echo", "command": command[0], "args": command[1:]}
    ex = execution({"mcp_servers": [server]}, "x")

    ok, added = await call(acts, ex, "echo__add", {"a": 2, "b": 3})
    assert ok and added == {"result": 5}
    ok, bad = await call(acts, ex, "echo__add", {"a": "two"})
    assert not ok
    assert "invalid arguments for tool 'echo__add'" in bad["error"]
    assert "a: 'two' is not of type 'integer'" in bad["error"]
    assert "'b' is a required property" in bad["error"]
    ok, unknown = await call(acts, ex, "echo__nope", {})
    assert not ok and unknown["error"] == "MCP server 'echo' has no tool 'nope'"
    ok, other = await call(acts, ex, "files__read", {})
    assert not ok and "not offered" in other["error"]


async def test_a_stdio_command_outside_the_allow_list_never_runs(
    bus: MessageBus, tmp_path: Path
) -> None:
    log = tmp_path / "starts.log"
    acts = AgentActivities(bus, None, OfflineProvider(), settings=Settings())
    server = {"name": "echo", "command": sys.executable, "args": [str(SERVER), "--log", str(log)]}
    ex = execution({"mcp_servers": [server]}, "x")
    ok, refused = await call(acts, ex, "echo__shout", {"text": "x"})
    assert not ok and "not in the operator's allow-list" in refused["error"]
    assert not log.exists()


async def test_an_http_mcp_server_gets_secret_headers_through_the_outbound_policy(
    bus: MessageBus, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPINDLE_MCP_SECRET_ECHO_TOKEN", "s3cret")
    server = {
        "name": "echo",
        "url": http_server,
        "headers": {"Authorization": {"secret": "ECHO_TOKEN", "prefix": "Bearer "}},
    }
    ex = execution({"mcp_servers": [server]}, "x")

    allowed = Settings(outbound_allow="127.0.0.1/32")
    acts = AgentActivities(bus, None, OfflineProvider(), settings=allowed)
    ok, who = await call(acts, ex, "echo__whoami", {})
    assert ok and who == {"result": "Bearer s3cret"}
    ok, shouted = await call(acts, ex, "echo__shout", {"text": "over http"})
    assert ok and shouted == {"result": "OVER HTTP"}

    # The default policy refuses loopback: no connection is made.
    refusing = AgentActivities(bus, None, OfflineProvider(), settings=Settings())
    ok, refused = await call(refusing, ex, "echo__shout", {"text": "x"})
    assert not ok and "refused" in refused["error"] and "outbound_allow" in refused["error"]
