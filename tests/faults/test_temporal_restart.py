"""The Temporal dev server dies (SIGKILL) while a run waits for a human and
comes back on its SQLite file: meanwhile the gateway answers 503 with
Retry-After; afterwards it recovers by itself, and the waiting run takes its
answer and completes, its stream intact."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest

from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.faults.conftest import FaultStack, approval_graph, wait_ready
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(90)]


def unavailable(reply: httpx.Response) -> None:
    assert reply.status_code == 503, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert int(reply.headers["retry-after"]) > 0
    assert "Temporal" in reply.json()["detail"], reply.json()


async def test_gateway_says_503_while_temporal_is_down_and_the_run_resumes_after(
    fault_stack: FaultStack,
) -> None:
    http, temporal = fault_stack.http, fault_stack.temporal_server.process
    await wait_ready(http)
    graph = approval_graph(f"temporal-{uuid.uuid4().hex[:8]}")
    run = await start(http, graph_spec=graph, input={"topic": "durability"})
    wf = run["workflow_id"]
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)
        await wait_for_status(http, wf, {"paused"})
        try:
            temporal.kill()
            start_reply, describe_reply = await asyncio.gather(
                http.post("/runs", json={"graph_spec": graph, "input": {"topic": "x"}}),
                http.get(f"/runs/{wf}"),
            )
            unavailable(start_reply)
            unavailable(describe_reply)
        finally:
            if not temporal.alive():
                temporal.start()

        async def described() -> bool:
            return (await http.get(f"/runs/{wf}")).status_code == 200

        await eventually(described, what="the gateway recovers", timeout=30, interval=0.2)
        await wait_for_status(http, wf, {"paused"})
        reply = await eventually(
            lambda: _answered(http, run), what="the run takes the answer", timeout=30
        )
        assert reply.json()["status"] == "accepted"
        await sse.read_to_end(timeout=30)
        assert sse.ended

    done = await wait_for_status(http, wf, {"completed"}, timeout=30)
    assert done["output"]["decision"] == "approve"
    assert_contiguous(sse.events)
    messages = [e.json() for e in sse.events]
    assert messages == await updates(http, run)
    assert [m["t"] for m in messages].count(T.REQUEST_INPUT) == 1
    assert messages[-1]["t"] == T.COMPLETE
    await wait_ready(http)


async def _answered(http: httpx.AsyncClient, run: dict[str, str]) -> httpx.Response | None:
    """The answer, once the run takes it (503 while no worker polls again yet)."""
    reply = await answer(http, run, {"data": {"decision": "approve"}, "client_message_id": "t1"})
    if reply.status_code == 503:
        return None
    assert reply.status_code == 200, reply.text
    return reply
