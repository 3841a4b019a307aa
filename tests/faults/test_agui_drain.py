"""An AG-UI stream through a gateway that gets SIGTERM mid-run.

The stream ends at once, cleanly, with a ``retry:`` hint; the client posts the
same ``RunAgentInput`` to another gateway with ``Last-Event-ID`` and gets the
rest of the AG-UI run exactly once (docs/protocols/agui.md). "Mid-run" is a
fact: the run's LLM turn is held by a fake LLM until the test releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from spindle.dev.processes import free_port
from tests.e2e.sse_client import SseConnection, SseEvent, StreamEnded
from tests.faults.test_graceful_shutdown import (
    ANSWER,
    DRAIN_RETRY_MS,
    DrainStack,
    drain_stack,
    exit_code,
    http_client,
    one_agent_graph,
    sigterm,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]
__all__ = ["drain_stack"]  # the fixture, shared with the run-stream drain tests

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


@contextlib.asynccontextmanager
async def agui_stream(
    http: httpx.AsyncClient, graph: str, body: dict[str, Any], last_event_id: str | None = None
) -> Any:
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    async with http.stream("POST", f"/agui/{graph}", json=body, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        yield SseConnection(response)


async def read_to_end(sse: SseConnection) -> list[SseEvent]:
    events = await sse.read_to_end(timeout=60)
    for event in events:
        EVENTS.validate_python(event.json())
    return events


async def test_sigterm_ends_an_agui_stream_and_another_gateway_resumes_it(
    drain_stack: DrainStack,
) -> None:
    stack = drain_stack
    worker = await stack.start_worker("worker-for-agui")
    port_a = free_port()
    leaving = stack.gateway_on("gateway-agui", port_a)
    await asyncio.to_thread(leaving.start)
    graph = one_agent_graph()
    body = {
        "threadId": f"thread-{uuid.uuid4().hex[:8]}",
        "runId": "r1",
        "messages": [],
        "forwardedProps": {"input": {"question": "Drain?"}},
    }
    try:
        async with (
            http_client(port_a) as http_a,
            http_client(stack.settings.gateway_port) as http_b,
        ):
            assert (await http_a.put(f"/graphs/{graph['name']}", json=graph)).status_code == 201
            async with agui_stream(http_a, graph["name"], body) as sse:
                first = await sse.next_event(timeout=30)
                assert first.json()["type"] == "RUN_STARTED"
                async with asyncio.timeout(30):
                    await stack.llm.arrived.wait()  # the run is mid-turn
                sigterm(leaving)
                with contextlib.suppress(StreamEnded):
                    while True:
                        await sse.next_item(timeout=20)
                assert sse.ended, "the response ends cleanly, not by a dropped connection"
            seen = list(sse.events)
            assert sse.parser.retry is not None
            assert DRAIN_RETRY_MS <= sse.parser.retry <= 2 * DRAIN_RETRY_MS
            assert "shutting down" in sse.comments[-1].text
            assert await exit_code(leaving, timeout=20) == 0

            stack.llm.release.set()
            last = seen[-1].id
            async with agui_stream(http_b, graph["name"], body, last_event_id=last) as sse:
                rest = await read_to_end(sse)
            async with agui_stream(http_b, graph["name"], body) as sse:
                whole = await read_to_end(sse)

        assert [e.id for e in seen + rest] == [e.id for e in whole]
        assert [e.data for e in seen + rest] == [e.data for e in whole]
        kinds = [e.json()["type"] for e in whole]
        assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
        assert any(ANSWER in e.data for e in rest)
        assert len(stack.llm.requests) == 1, "nothing was started twice"
    finally:
        stack.llm.release.set()
        leaving.stop()
        worker.stop()
