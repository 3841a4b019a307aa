"""JSON-RPC 2.0 over WebSocket (``/ws``), with a real client (the ``websockets`` package).

The same methods as ``POST /`` (the same dispatcher answers), the same stream
events as ``tasks.execute``'s SSE, pushed as ``stream.event`` notifications;
auth by the handshake's credential or an ``auth`` first frame; clean close codes
(docs/protocols/jsonrpc.md, "WebSocket").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.jsonrpc_client import ok, request
from tests.e2e.test_task_execution import chain_tree

pytestmark = pytest.mark.e2e


def ws_url(stack: SpindleStack) -> str:
    return stack.base_url.replace("http://", "ws://", 1) + "/ws"


@asynccontextmanager
async def ws(
    stack: SpindleStack, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientConnection]:
    async with connect(ws_url(stack), additional_headers=headers or {}) as connection:
        yield connection


async def call(connection: ClientConnection, body: Any) -> dict[str, Any]:
    await connection.send(orjson.dumps(body).decode())
    async with asyncio.timeout(30):
        answer: dict[str, Any] = orjson.loads(await connection.recv())
    return answer


async def closed_with(connection: ClientConnection) -> int | None:
    with pytest.raises(ConnectionClosed) as closed:
        async with asyncio.timeout(30):
            while True:
                await connection.recv()
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


async def test_the_methods_answer_as_over_http(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient
) -> None:
    async with ws(stack, callers["alice"].headers) as connection:
        created = await call(connection, request("tasks.create", {"name": "over ws"}, "c-1"))
        assert created["id"] == "c-1" and created["result"]["status"] == "pending"
        task_id = created["result"]["id"]
        got = await call(connection, request("tasks.get", {"task_id": task_id}, 2))
        assert got["result"] == await ok(http, "tasks.get", {"task_id": task_id})
        # Errors are the HTTP endpoint's: seed 003 codes, -32601 for no such method.
        missing = await call(connection, request("tasks.get", {"task_id": "not-a-uuid"}, 3))
        assert missing["error"]["code"] == -32602
        unknown = await call(connection, request("no.such.method", {}, 4))
        assert unknown["error"]["code"] == -32601
        batch = await call(
            connection, [request("tasks.get", {"task_id": task_id}, 5), request("nope", {}, 6)]
        )
        assert [m["id"] for m in batch] == [5, 6] and batch[0]["result"]["id"] == task_id


async def test_a_parse_error_is_answered_and_the_connection_stays_open(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    async with ws(stack, callers["alice"].headers) as connection:
        await connection.send("{not json")
        answer = orjson.loads(await connection.recv())
        assert answer == {
            "jsonrpc": "2.0",
            "error": {"code": -32700, "message": "Parse error"},
            "id": None,
        }
        still = await call(connection, request("tasks.create", {"name": "after"}, 7))
        assert still["result"]["status"] == "pending"
        # A frame over ws_max_message_bytes (1 MiB by default) closes with 1009.
        async with ws(stack, callers["alice"].headers) as big:
            await big.send("[" + " " * (1_048_576 + 1) + "]")
            assert await closed_with(big) == 1009
        # A binary frame is not JSON-RPC: the connection closes with 1003.
        await connection.send(b"\x00\x01")
        assert await closed_with(connection) == 1003


async def test_bad_or_missing_credentials_close_with_1008(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    async with ws(stack, {"Authorization": "Bearer spk_not_a_real_key"}) as connection:
        assert await closed_with(connection) == 1008
    async with ws(stack) as connection:  # no credential and no auth frame
        await connection.send(orjson.dumps(request("tasks.list", {}, 1)).decode())
        assert await closed_with(connection) == 1008
    async with ws(stack) as connection:  # a browser: the key in an auth first frame
        authed = await call(connection, request("auth", {"api_key": callers["alice"].key}, "a"))
        assert authed["result"] == {"authenticated": True}
        listed = await call(connection, request("tasks.list", {"limit": 1}, 2))
        assert "tasks" in listed["result"]
    async with ws(stack) as connection:
        await connection.send(orjson.dumps(request("auth", {"api_key": "spk_bad"}, 1)).decode())
        assert await closed_with(connection) == 1008


async def test_a_streaming_execute_pushes_its_events_as_notifications(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "s-1",
        "method": "tasks.execute",
        "params": {"tasks": chain_tree(), "use_streaming": True},
    }
    events: list[dict[str, Any]] = []
    async with ws(stack, callers["alice"].headers) as connection:
        await connection.send(orjson.dumps(body).decode())
        async with asyncio.timeout(60):
            while True:
                message = orjson.loads(await connection.recv())
                if "method" not in message:
                    final = message
                    break
                assert message["method"] == "stream.event"
                events.append(message["params"])
        # The connection goes on serving calls after the stream.
        more = await call(connection, request("tasks.create", {"name": "next"}, 9))
        assert more["result"]["status"] == "pending"
    assert final == {
        "jsonrpc": "2.0",
        "result": {"stream": "ended", "events": len(events)},
        "id": "s-1",
    }
    assert all(e["request_id"] == "s-1" for e in events)
    seqs = [e["id"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    root_id = events[0]["data"]["root_task_id"]
    assert events[0]["event"] == "task_status_update"
    assert events[-1]["event"] == "task_completed" and events[-1]["data"]["task_id"] == root_id
    # The same events the tree's tasks record.
    root = await ok(http, "tasks.get", {"task_id": root_id})
    assert root["status"] == "completed"
    completed = [e["data"]["task_id"] for e in events if e["event"] == "task_completed"]
    assert len(completed) == 4 and completed[-1] == root_id


async def test_an_a2a_stream_arrives_as_notifications_too(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "a2a-1",
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "ws-stream",
                "parts": [{"kind": "text", "text": "What is 5 plus 5?"}],
            }
        },
    }
    events: list[dict[str, Any]] = []
    async with ws(stack, callers["alice"].headers) as connection:
        await connection.send(orjson.dumps(body).decode())
        async with asyncio.timeout(60):
            while "method" in (message := orjson.loads(await connection.recv())):
                events.append(message["params"])
    assert message["id"] == "a2a-1" and "result" in message, message
    assert message["result"]["events"] == len(events)
    kinds = [e["data"]["kind"] for e in events]
    assert kinds[0] == "task" and "artifact-update" in kinds
    final = events[-1]["data"]
    assert final["kind"] == "status-update" and final["status"]["state"] == "completed"
