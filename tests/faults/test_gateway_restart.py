"""The gateway process dies (SIGKILL) mid-stream and comes back: a client that
resumes with ``Last-Event-ID`` gets the rest of the conversation, nothing lost,
nothing twice."""

from __future__ import annotations

import uuid

import pytest

from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.faults.conftest import (
    FaultStack,
    approval_graph,
    read_until_dropped,
    resume_to_end,
    wait_ready,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(90)]


async def test_gateway_killed_mid_stream_client_resumes_with_last_event_id(
    fault_stack: FaultStack,
) -> None:
    http, gateway = fault_stack.http, fault_stack.spindle
    await wait_ready(http)
    run = await start(
        http, graph_spec=approval_graph(f"gw-{uuid.uuid4().hex[:8]}"), input={"topic": "restart"}
    )
    try:
        async with open_sse(http, run["stream_url"]) as sse:
            await sse.until_type(T.REQUEST_INPUT)
            gateway.kill_gateway()
            await read_until_dropped(sse, timeout=10)
        seen = [*sse.events]
    finally:
        await gateway.restart_gateway()

    reply = await answer(http, run, {"data": {"decision": "approve"}, "client_message_id": "g1"})
    assert reply.status_code == 200, reply.text
    # Messages posted while no client was connected are in the resumed stream.
    await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=30)
    seen += await resume_to_end(http, run["stream_url"], seen[-1].id or "")

    assert_contiguous(seen)
    messages = [e.json() for e in seen]
    assert messages == await updates(http, run)
    assert [m["t"] for m in messages].count(T.QUESTION) == 1
    assert messages[-1]["t"] == T.COMPLETE
