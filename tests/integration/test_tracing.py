"""OpenTelemetry traces of a run on the real dev server, and log lines that name them.

A client with ``spindle.shared.platform.telemetry.temporal_interceptors`` starts a small graph on
a worker built from that client (as ``python -m spindle.worker.main`` does): the start,
the workflow and every node's activity share one trace; node spans carry seed
001's attributes; a JSON log line written inside a node names the trace.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from spindle.nodes import NodeContext, NodeResult, node_type
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.logging_setup import build_handler
from spindle.shared.platform.settings import Settings
from spindle.shared.platform.telemetry import setup_tracing, temporal_interceptors
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from tests.integration.traced_temporal import named, traced_temporal_client
from tests.polling import eventually

pytestmark = pytest.mark.integration

NODE_LOG = logging.getLogger("tests.tracing.node")


@node_type("test_traced_items")
async def traced_items(ctx: NodeContext) -> NodeResult:
    """Logs one line and returns three items."""
    NODE_LOG.info("making three items")
    return NodeResult(data=["a", "b", "c"])


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def traced_client(settings: Settings, spans: InMemorySpanExporter) -> AsyncIterator[Client]:
    async with traced_temporal_client(settings, spans) as client:
        yield client


@pytest.fixture
def node_log_lines(settings: Settings) -> Iterator[io.StringIO]:
    lines = io.StringIO()
    handler = build_handler(settings.model_copy(update={"log_format": "json"}), lines)
    NODE_LOG.addHandler(handler)
    NODE_LOG.setLevel(logging.INFO)
    yield lines
    NODE_LOG.removeHandler(handler)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_one_run_is_one_trace_with_a_span_per_node(
    traced_client: Client,
    settings: Settings,
    spans: InMemorySpanExporter,
    node_log_lines: io.StringIO,
) -> None:
    queue = f"tracing-{uuid.uuid4().hex[:8]}"
    graph = parse_graph(
        {
            "name": "traced",
            "entry": "make",
            "nodes": [{"id": "make", "type": "test_traced_items"}, {"id": "out", "type": "output"}],
            "edges": [{"from": "make", "to": "out"}],
        }
    )
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    run_id = f"traced-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            traced_client, settings, bus=bus, archive=archive, task_queue=queue
        ):
            handle = await traced_client.start_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=graph),
                id=run_id,
                task_queue=queue,
                result_type=GraphRunResult,
            )
            result: GraphRunResult = await asyncio.wait_for(handle.result(), 30)
    finally:
        await bus.close()
        await archive.close()
    assert result.status == RunStatus.COMPLETED

    def node_spans() -> list[ReadableSpan]:
        # Other activities (run bookkeeping) have spans too, without a nodeId.
        activities = named(list(spans.get_finished_spans()), "RunActivity:")
        found = [s for s in activities if "nodeId" in attributes(s)]
        return found if len(found) >= 2 else []

    activity_spans = await eventually(node_spans, what="both node spans exported", timeout=5)
    finished = list(spans.get_finished_spans())
    [start] = named(finished, "StartWorkflow:")
    [workflow] = named(finished, "RunWorkflow:")
    trace_id = start.context.trace_id
    assert workflow.context.trace_id == trace_id
    activities = named(finished, "RunActivity:")
    assert {s.context.trace_id for s in activities} == {trace_id}

    by_node: dict[Any, Any] = {attributes(s)["nodeId"]: attributes(s) for s in activity_spans}
    assert sorted(by_node) == ["make", "out"] and len(activity_spans) == 2
    make = by_node["make"]
    assert (make["nodeType"], make["status"], make["itemCount"]) == (
        "test_traced_items",
        NodeStatus.SUCCESS.value,
        3,
    )
    assert make["runId"] == run_id and make["durationMs"] >= 0
    assert (by_node["out"]["nodeType"], by_node["out"]["status"]) == (
        "output",
        NodeStatus.SUCCESS.value,
    )
    assert by_node["out"]["itemCount"] >= 1

    [line] = [json.loads(text) for text in node_log_lines.getvalue().splitlines()]
    assert line["message"] == "making three items"
    assert line["traceId"] == f"{trace_id:032x}"
    [make_span] = [s for s in activity_spans if attributes(s)["nodeId"] == "make"]
    assert line["spanId"] == f"{make_span.context.span_id:016x}"


def test_tracing_is_off_without_an_endpoint(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert setup_tracing("spindle-test", settings) is None
    assert temporal_interceptors(None) == []
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert setup_tracing("spindle-test", settings) is None


def test_an_endpoint_turns_tracing_on_under_the_configured_service_name(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "spindle-traced")
    # Keep the session's global tracer provider as it is.
    monkeypatch.setattr(trace, "set_tracer_provider", lambda provider: None)
    provider = setup_tracing("spindle-test", settings)
    assert provider is not None
    try:
        assert provider.resource.attributes["service.name"] == "spindle-traced"
        assert len(temporal_interceptors(provider)) == 1
    finally:
        provider.shutdown()
