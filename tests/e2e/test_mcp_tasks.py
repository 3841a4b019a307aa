"""MCP Tasks (2025-11-25) on graph tools, spoken as raw JSON-RPC over the MCP HTTP transport.

The ``mcp`` SDK (2.3.0) has no Tasks support, client or server, so these tests
send the messages of the spec's basic/utilities/tasks page themselves: a
``tools/call`` with ``task`` answers a ``CreateTaskResult`` at once, and
``tasks/get``, ``tasks/result``, ``tasks/cancel`` and ``tasks/list`` follow the
run behind it (its task id is the run id). docs/protocols/mcp.md, "Tasks".
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_mcp import mcp_client

pytestmark = pytest.mark.e2e

VERSION = "2025-11-25"


class RawMcp:
    """One MCP session over streamable HTTP, every message written by hand."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http
        self.ids = itertools.count(1)
        self.session: str | None = None
        self.capabilities: dict[str, Any] = {}

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
        if self.session is not None:
            headers["Mcp-Session-Id"] = self.session
        return headers

    async def exchange(
        self, method: str, params: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """(the response, the notifications sent on its stream before it)."""
        request_id = next(self.ids)
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}}
        reply = await self.http.post("/mcp", json=body, headers=self._headers())
        assert reply.status_code == 200, reply.text
        self.session = reply.headers.get("mcp-session-id", self.session)
        messages = _messages(reply)
        [response] = [m for m in messages if m.get("id") == request_id and "method" not in m]
        return response, [m for m in messages if "method" in m and "id" not in m]

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response, _ = await self.exchange(method, params)
        assert "result" in response, response
        result: dict[str, Any] = response["result"]
        return result

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        response, _ = await self.exchange(method, params)
        assert "error" in response, response
        error: dict[str, Any] = response["error"]
        return error

    async def initialize(self) -> None:
        result = await self.request(
            "initialize",
            {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "raw-tasks-test", "version": "1"},
            },
        )
        self.capabilities = result["capabilities"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = await self.http.post("/mcp", json=note, headers=self._headers())
        assert sent.status_code == 202, sent.text


def _messages(reply: httpx.Response) -> list[dict[str, Any]]:
    if reply.headers["content-type"].startswith("application/json"):
        document = reply.json()
        return document if isinstance(document, list) else [document]
    found = []
    for line in reply.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            found.append(orjson.loads(line[5:].strip()))
    return found


@asynccontextmanager
async def raw_mcp(stack: SpindleStack, caller: Caller) -> AsyncIterator[RawMcp]:
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=caller.headers, timeout=120
    ) as http:
        session = RawMcp(http)
        await session.initialize()
        yield session


async def start_task(session: RawMcp, tool: str, arguments: dict[str, Any], **meta: Any) -> str:
    params: dict[str, Any] = {"name": tool, "arguments": arguments, "task": {"ttl": 60_000}}
    if meta:
        params["_meta"] = meta
    created = await session.request("tools/call", params)
    task = created["task"]
    assert task["status"] == "working" and task["createdAt"] and task["pollInterval"] > 0
    assert task["ttl"] is None  # kept as long as the run is
    task_id: str = task["taskId"]
    return task_id


async def test_tasks_are_advertised_and_a_task_runs_to_its_result(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], http: httpx.AsyncClient
) -> None:
    async with raw_mcp(stack, callers["alice"]) as session:
        tasks = session.capabilities["tasks"]
        assert tasks["requests"]["tools"]["call"] == {} and "cancel" in tasks and "list" in tasks
        listed = await session.request("tools/list")
        [pipeline] = [t for t in listed["tools"] if t["name"] == "pipeline"]
        assert pipeline["execution"] == {"taskSupport": "optional"}

        task_id = await start_task(session, "pipeline", {"text": "The outage is terrible"})
        status = await session.request("tasks/get", {"taskId": task_id})
        assert status["taskId"] == task_id
        assert status["status"] in ("working", "completed")

        response, progress = await session.exchange(
            "tasks/result", {"taskId": task_id, "_meta": {"progressToken": "p1"}}
        )
        result = response["result"]
        assert result["isError"] is False or "isError" not in result
        assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        run = (await http.get(f"/runs/{task_id}")).json()
        assert run["status"] == "completed"
        assert result["structuredContent"] == run["output"]
        # Progress on tasks/result's stream, each naming its message's seq (the cursor).
        assert progress, "no progress notification on tasks/result"
        seqs = [p["params"]["_meta"]["spindle/seq"] for p in progress]
        assert all(p["params"]["progressToken"] == "p1" for p in progress)
        assert seqs == sorted(set(seqs))

        # Resuming after a cursor sends only what came after it.
        response, resumed = await session.exchange(
            "tasks/result",
            {"taskId": task_id, "_meta": {"progressToken": "p2", "spindle/afterSeq": seqs[0]}},
        )
        assert [p["params"]["_meta"]["spindle/seq"] for p in resumed] == seqs[1:]
        assert response["result"]["structuredContent"] == run["output"]

        # A cursor the run never reached is an explicit error, never a silent skip.
        beyond = await session.error(
            "tasks/result",
            {"taskId": task_id, "_meta": {"progressToken": "p3", "spindle/afterSeq": 10**6}},
        )
        assert beyond["code"] == -32602 and beyond["data"]["reason"] == "CURSOR_BEYOND_END"

        done = await session.request("tasks/get", {"taskId": task_id})
        assert done["status"] == "completed"
        page = await session.request("tasks/list")
        assert task_id in {t["taskId"] for t in page["tasks"]}


async def test_a_task_waiting_for_input_is_input_required_and_cancels(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], http: httpx.AsyncClient
) -> None:
    async with raw_mcp(stack, callers["alice"]) as session:
        task_id = await start_task(session, "approval-flow", {"topic": "mcp task cancel"})
        # The run parks at its prompt: poll tasks/get as a client does.
        status: dict[str, Any] = {}
        for _ in range(1000):
            status = await session.request("tasks/get", {"taskId": task_id})
            if status["status"] != "working":
                break
        assert status["status"] == "input_required", status
        assert status["statusMessage"]

        cancelled = await session.request("tasks/cancel", {"taskId": task_id})
        assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"
        run = (await http.get(f"/runs/{task_id}")).json()
        assert run["status"] in ("canceled", "terminated"), run
        again = await session.error("tasks/cancel", {"taskId": task_id})
        assert again["code"] == -32602 and "already" in again["message"]
        result = await session.request("tasks/result", {"taskId": task_id})
        assert result["isError"] is True


async def test_unknown_and_other_tenants_tasks_are_invalid_params(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], http: httpx.AsyncClient
) -> None:
    async with raw_mcp(stack, callers["alice"]) as alice:
        task_id = await start_task(alice, "approval-flow", {"topic": "mine"})
        unknown = await alice.error("tasks/get", {"taskId": "no-such-run"})
        assert unknown["code"] == -32602 and "no-such-run" in unknown["message"]
        # bob (same tenant, no role) may read it but not cancel it, as over REST.
        async with raw_mcp(stack, callers["bob"]) as bob:
            assert (await bob.request("tasks/get", {"taskId": task_id}))["taskId"] == task_id
            refused = await bob.error("tasks/cancel", {"taskId": task_id})
            assert refused["code"] == -32602
        async with raw_mcp(stack, callers["mallory"]) as mallory:
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                error = await mallory.error(method, {"taskId": task_id})
                assert error["code"] == -32602 and "not found" in error["message"], method
            listed = await mallory.request("tasks/list")
            assert task_id not in {t["taskId"] for t in listed["tasks"]}
        # Arguments the graph refuses stay a tool error (isError), task or not.
        refused_args = await alice.request(
            "tools/call",
            {"name": "approval-flow", "arguments": {"topic": 42}, "task": {}},
        )
        assert refused_args["isError"] is True and "topic" in refused_args["content"][0]["text"]
        await alice.request("tasks/cancel", {"taskId": task_id})


async def test_the_session_stream_gets_status_and_progress_notifications(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with raw_mcp(stack, callers["alice"]) as session:
        seen: list[dict[str, Any]] = []
        ended = asyncio.Event()
        listening = asyncio.Event()

        async def listen() -> None:
            headers = {**session._headers(), "Accept": "text/event-stream"}
            async with session.http.stream("GET", "/mcp", headers=headers) as stream:
                assert stream.status_code == 200
                listening.set()
                async for line in stream.aiter_lines():
                    if line.startswith("data:") and line[5:].strip():
                        message = orjson.loads(line[5:].strip())
                        seen.append(message)
                        if message.get("method") == "notifications/tasks/status" and message[
                            "params"
                        ]["status"] in ("completed", "failed", "cancelled"):
                            ended.set()
                            return

        listener = asyncio.create_task(listen())
        async with asyncio.timeout(60):
            await listening.wait()
            task_id = await start_task(
                session, "pipeline", {"text": "customers are angry"}, progressToken="watch"
            )
            await ended.wait()
        await listener
    statuses = [m["params"] for m in seen if m["method"] == "notifications/tasks/status"]
    assert statuses[-1]["taskId"] == task_id and statuses[-1]["status"] == "completed"
    progress = [m["params"] for m in seen if m["method"] == "notifications/progress"]
    assert progress and all(p["progressToken"] == "watch" for p in progress)
    assert all(
        p["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id} for p in progress
    )
    seqs = [p["_meta"]["spindle/seq"] for p in progress]
    assert seqs == sorted(set(seqs))


async def test_the_official_client_sees_tasks_advertised(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    # The SDK client has no tasks/* calls; what it does parse is the capability
    # and each tool's execution.taskSupport.
    async with mcp_client(stack, callers["alice"], mode="legacy") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        capabilities = client.server_capabilities
    assert tools["pipeline"].execution is not None
    assert tools["pipeline"].execution.task_support == "optional"
    assert capabilities is not None and capabilities.tasks is not None
    assert capabilities.tasks.requests is not None and capabilities.tasks.requests.tools


async def test_malformed_requests_and_cursors_are_protocol_errors(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    # MCP 2025-11-25: a malformed request stays a JSON-RPC error (only a tool's own
    # input validation is an isError result); a cursor the server never issued is -32602.
    async with raw_mcp(stack, callers["alice"]) as session:
        nameless = await session.error("tools/call", {"arguments": {}})
        assert nameless["code"] == -32602, nameless
        bad_task = await session.error("tools/call", {"name": "pipeline", "task": "soon"})
        assert bad_task["code"] == -32602, bad_task
        cursor = await session.error("tasks/list", {"cursor": "not-ours"})
        assert cursor["code"] == -32602, cursor
        unknown = await session.error("tasks/frobnicate", {})
        assert unknown["code"] == -32601, unknown
