"""One run, one trace, across real processes: the REST request that started it,
the workflow, every node, and the HITL answer sent later over REST.

A gateway and a worker process of their own export spans over OTLP/HTTP (the
standard ``OTEL_*`` variables) to a local receiver; the test reads back what they
exported and what they archived in MongoDB.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import AsyncMongoClient
from temporalio.client import Client

from spindle.dev.processes import free_port
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import page_messages
from tests.e2e.conftest import example_graph, running_stack
from tests.e2e.otlp_receiver import Received, ReceivedSpan, otlp_trace_receiver
from tests.polling import eventually

pytestmark = pytest.mark.e2e

SERVER = 2  # OTLP SpanKind SPAN_KIND_SERVER


@pytest.fixture(scope="module")
def receiver() -> Iterator[tuple[str, Received]]:
    with otlp_trace_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def traced_settings(e2e_settings: Settings) -> Settings:
    suffix = uuid.uuid4().hex[:8]
    return e2e_settings.model_copy(
        update={
            "task_queue": f"spindle-e2e-traced-{suffix}",
            "mongo_db": f"spindle_e2e_traced_{suffix}",
            "gateway_port": free_port(),
            "auth_disabled": True,
        }
    )


@pytest.fixture(scope="module")
async def traced_gateway(
    traced_settings: Settings,
    temporal_client: Client,
    artifacts_dir: Path,
    receiver: tuple[str, Received],
) -> AsyncIterator[httpx.AsyncClient]:
    """A worker and a gateway that export their spans to ``receiver``."""
    endpoint, _ = receiver
    otel = {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_SDK_DISABLED": "false",
    }
    logs = artifacts_dir / "e2e-traced"
    with pytest.MonkeyPatch.context() as env:
        for name, value in otel.items():
            env.setenv(name, value)
        # The processes copy the environment when they start, within this block.
        stack = running_stack(traced_settings, temporal_client, logs)
        running = await stack.__aenter__()
    try:
        async with httpx.AsyncClient(base_url=running.base_url, timeout=30.0) as http:
            yield http
    finally:
        await stack.__aexit__(None, None, None)


@pytest.fixture(scope="module")
async def mongo(traced_settings: Settings) -> AsyncIterator[Any]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        traced_settings.mongo_url, tz_aware=True
    )
    yield client[traced_settings.mongo_db]
    await client.close()


def one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    [found] = [s for s in spans if s.name == name]
    return found


async def test_the_start_request_the_workflow_and_the_answer_share_the_runs_trace(
    traced_gateway: httpx.AsyncClient, receiver: tuple[str, Received], mongo: Any
) -> None:
    http = traced_gateway
    _, received = receiver
    registered = await http.put("/graphs/approval-flow", json=example_graph("approval-flow"))
    assert registered.status_code in (200, 201), registered.text
    started = await http.post(
        "/runs", json={"graph": "approval-flow", "input": {"topic": "pricing"}}
    )
    assert started.status_code in (200, 201, 202), started.text
    workflow_id, run_id = started.json()["workflow_id"], started.json()["run_id"]

    async def status() -> dict[str, Any]:
        reply = await http.get(f"/runs/{workflow_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body

    async def paused() -> bool:
        return (await status())["pending_input"] is not None

    await eventually(paused, what="the run waits for its review")
    answered = await http.post(
        f"/runs/{workflow_id}/{run_id}/signal/UserInput",
        json={"data": {"decision": "approve"}, "client_message_id": "answer-1"},
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "accepted"

    async def completed() -> bool:
        return bool((await status())["status"] == "completed")

    await eventually(completed, what="the run completes", timeout=30)

    def run_spans() -> list[ReceivedSpan]:
        spans = received.spans()
        starts = [
            s
            for s in spans
            if s.name == "StartWorkflow:GraphRun"
            and s.attributes.get("temporalWorkflowID") == workflow_id
        ]
        if not starts:
            return []
        in_trace = [s for s in spans if s.trace_id == starts[0].trace_id]
        names = {s.name for s in in_trace}
        wanted = {"RunWorkflow:GraphRun", "StartWorkflowUpdate:UserInput", "HandleUpdate:UserInput"}
        nodes = {s.attributes.get("nodeId") for s in in_trace}
        done = wanted <= names and {"draft", "review", "result"} <= nodes
        return in_trace if done else []

    trace = await eventually(run_spans, what="the run's spans exported", timeout=20)
    trace_id = trace[0].trace_id
    by_id = {s.span_id: s for s in trace}

    # The REST request that started the run is the root of the run's trace.
    start = one(trace, "StartWorkflow:GraphRun")
    request = by_id[start.parent_span_id]
    assert (request.service, request.kind) == ("spindle-gateway", SERVER)
    assert request.name.startswith("POST /runs")
    assert one(trace, "RunWorkflow:GraphRun").service == "spindle-worker"

    # The answer, sent later in a request of its own, joins the run's trace:
    # the gateway's update span is a child of the start request and links back
    # to the answer's request, whose own trace is another one.
    joined = one(trace, "RunUpdate:UserInput")
    assert joined.parent_span_id == request.span_id
    assert joined.attributes["runId"] == workflow_id
    update = one(trace, "StartWorkflowUpdate:UserInput")
    assert update.parent_span_id == joined.span_id and update.service == "spindle-gateway"
    [(linked_trace, linked_span)] = joined.links
    assert linked_trace != trace_id
    signal_request = [s for s in received.spans() if s.span_id == linked_span]
    assert signal_request and signal_request[0].name.startswith("POST /runs/")
    assert signal_request[0].kind == SERVER
    assert one(trace, "HandleUpdate:UserInput").service == "spindle-worker"

    # The archive names the same trace: the run document and every message. The
    # worker's archiver writes the run's end (its document last) after the
    # workflow's own status says completed.
    async def archived_as_completed() -> dict[str, Any] | None:
        found = await mongo["runs"].find_one({"_id": workflow_id})
        return found if found is not None and found.get("status") == "completed" else None

    doc = await eventually(archived_as_completed, what="the run archived as completed")
    assert doc["traceId"] == trace_id
    assert doc["traceparent"].startswith(f"00-{trace_id}-{request.span_id}-")
    pages = await mongo["message_pages"].find({"stream_id": workflow_id}).to_list()
    messages = [m for page in pages for m in page_messages(page)]
    assert messages and {m["traceId"] for m in messages} == {trace_id}

    def posting_spans() -> set[str]:
        # The last activity's span may still be on its way to the receiver.
        activities = {
            s.span_id
            for s in received.spans()
            if s.trace_id == trace_id and s.name.startswith("RunActivity:")
        }
        return activities if {m["spanId"] for m in messages} <= activities else set()

    await eventually(posting_spans, what="each message names the activity span that posted it")

    # The bundle carries the trace ids too.
    bundle = (await http.get(f"/runs/{workflow_id}/bundle")).json()
    assert bundle["trace_ids"]["run"] == trace_id
    assert [m["seq"] for m in bundle["trace_ids"]["messages"]] == [
        m["seq"] for m in sorted(messages, key=lambda m: m["seq"])
    ]
    assert {m["traceId"] for m in bundle["trace"]} == {trace_id}
