"""What an HTTP client of the gateway does, as small async functions for tests."""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from typing import Any

import httpx
import orjson

from spindle.shared.contracts.messages import AgentMessageType as T
from tests.e2e.sse_client import SseEvent
from tests.polling import eventually

__all__ = [
    "T",
    "answer",
    "assert_contiguous",
    "gzip_updates",
    "start",
    "updates",
    "wait_for_status",
]


async def start(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    """POST /runs and return the 201 body."""
    reply = await http.post("/runs", json=body)
    assert reply.status_code == 201, reply.text
    started: dict[str, Any] = reply.json()
    return started


async def answer(
    http: httpx.AsyncClient, run: dict[str, Any], payload: dict[str, Any]
) -> httpx.Response:
    return await http.post(
        f"/runs/{run['workflow_id']}/{run['run_id']}/signal/UserInput", json=payload
    )


async def wait_for_status(
    http: httpx.AsyncClient,
    workflow_id: str,
    statuses: Iterable[str],
    timeout: float = 30.0,
    *,
    field: str = "status",
) -> dict[str, Any]:
    """Poll ``GET /runs/{id}`` until its ``field`` is one of ``statuses``."""
    wanted = set(statuses)

    async def described() -> dict[str, Any] | None:
        reply = await http.get(f"/runs/{workflow_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body if body[field] in wanted else None

    return await eventually(
        described, what=f"run {workflow_id} {field} in {wanted}", timeout=timeout, interval=0.1
    )


async def updates(
    http: httpx.AsyncClient, run: dict[str, Any], since: int | None = None
) -> list[dict[str, Any]]:
    params = {"since": since} if since is not None else None
    reply = await http.get(f"/runs/{run['workflow_id']}/{run['run_id']}/updates", params=params)
    assert reply.status_code == 200, reply.text
    messages: list[dict[str, Any]] = reply.json()["messages"]
    return messages


async def gzip_updates(
    http: httpx.AsyncClient, run: dict[str, Any]
) -> tuple[httpx.Headers, list[dict[str, Any]]]:
    """GET /updates asking for gzip; decompress the raw body ourselves."""
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/updates"
    async with http.stream("GET", url, headers={"Accept-Encoding": "gzip"}) as reply:
        assert reply.status_code == 200
        raw = b"".join([chunk async for chunk in reply.aiter_raw()])
    body = gzip.decompress(raw) if reply.headers.get("content-encoding") == "gzip" else raw
    messages: list[dict[str, Any]] = orjson.loads(body)["messages"]
    return reply.headers, messages


def assert_contiguous(events: list[SseEvent], first: int = 1) -> None:
    """SSE ids are first, first+1, ... with no gap and no repeat."""
    seqs = [e.seq for e in events]
    assert seqs == list(range(first, first + len(seqs))), seqs


def types(messages: Iterable[dict[str, Any]]) -> list[int]:
    return [m["t"] for m in messages]
