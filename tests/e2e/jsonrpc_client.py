"""A small JSON-RPC 2.0 client for the e2e tests of seed 003's task methods."""

from __future__ import annotations

from typing import Any

import httpx

EXECUTOR = "prompt"  # a built-in node type: always in the worker catalog


def request(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "id": request_id}
    if params is not None:
        body["params"] = params
    return body


async def post(client: httpx.AsyncClient, body: Any, path: str = "/") -> httpx.Response:
    return await client.post(path, json=body)


async def rpc(
    client: httpx.AsyncClient, method: str, params: Any = None, request_id: Any = 1
) -> dict[str, Any]:
    """The JSON-RPC response object for one call (HTTP 200 asserted)."""
    reply = await post(client, request(method, params, request_id))
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = reply.json()
    assert body["jsonrpc"] == "2.0"
    assert body["id"] == request_id
    return body


async def ok(client: httpx.AsyncClient, method: str, params: Any = None) -> Any:
    body = await rpc(client, method, params)
    assert "error" not in body, body
    return body["result"]


async def fails(
    client: httpx.AsyncClient, method: str, params: Any, code: int, field: str | None = None
) -> dict[str, Any]:
    body = await rpc(client, method, params)
    assert "result" not in body, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, error
    if field is not None:
        assert error["data"]["field"] == field, error
        assert error["data"]["reason"], error
    return error


async def create(client: httpx.AsyncClient, name: str, **fields: Any) -> str:
    result = await ok(client, "tasks.create", {"name": name, **fields})
    task_id: str = result["id"]
    return task_id
