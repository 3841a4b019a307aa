"""Per-node start/finish log lines (seed 001), as JSON, from the real worker.

Every node activity logs ``node_started`` and ``node_finished`` with the run,
node, attempt and (with tracing on) trace ids; a retried attempt logs its own
pair with its attempt number.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from temporalio.testing import ActivityEnvironment
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput

from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.logging_setup import JsonFormatter
from spindle.worker.contracts import NodeExecution, RunRef
from spindle.worker.telemetry.node_logs import NodeLogInterceptor
from spindle.worker.tools.registry import tool
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

_failures = {"left": 1}


@tool(name="test_logs_flaky")
def flaky(text: str) -> str:
    """Fail the first call, then echo (test tool)."""
    if _failures["left"]:
        _failures["left"] -= 1
        raise RuntimeError("first attempt fails")
    return text


@pytest.fixture
def node_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter(payload_limit=1000))
    logger = logging.getLogger("spindle.worker.nodes")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_each_node_logs_json_start_and_finish_lines_with_its_ids(
    runner: GraphRunner, node_lines: io.StringIO
) -> None:
    spec = parse_graph(
        {
            "name": "logs",
            "entry": "echo",
            "nodes": [
                {
                    "id": "echo",
                    "type": "tool",
                    "params": {"tool": "test_logs_flaky", "args": {"text": "hi"}},
                    "retry": {"max_attempts": 2, "initial_interval_seconds": 1},
                },
                {"id": "ask", "type": "agent", "params": {"prompt": "What is 2 + 3?"}},
            ],
            "edges": [{"from": "echo", "to": "ask"}],
        }
    )
    handle = await runner.start(spec, None)
    await handle.result()

    mine = [line for line in lines(node_lines) if line.get("runId") == handle.id]
    echo = [
        (line["event"], line["attempt"], line.get("status"))
        for line in mine
        if line["nodeId"] == "echo"
    ]
    assert echo == [
        ("node_started", 1, None),
        ("node_finished", 1, "failed"),
        ("node_started", 2, None),
        ("node_finished", 2, "ok"),
    ]
    ask = [line for line in mine if line["nodeId"] == "ask"]
    assert [line["event"] for line in ask] == ["node_started", "node_finished"]
    for line in mine:
        assert line["level"] in ("INFO", "WARNING") and line["logger"] == "spindle.worker.nodes"
        assert line["temporalRunId"] and line["activityId"] and line["visit"] == 1
    finished = [line for line in mine if line["event"] == "node_finished"]
    assert all(isinstance(line["durationMs"], float) for line in finished)
    assert [line["error"] for line in finished if line["status"] == "failed"] == ["RuntimeError"]
    assert {line["nodeType"] for line in ask} == {"agent"} and ask[0]["activity"] == "llm_turn"


class _Run(ActivityInboundInterceptor):
    """The innermost interceptor: calls the activity function."""

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        return await input.fn(*input.args)


async def test_the_lines_carry_the_trace_of_the_activity_span(node_lines: io.StringIO) -> None:
    execution = NodeExecution(
        run=RunRef(workflow_id="traced", run_id="r", stream_id="traced", graph_name="g"),
        node={"id": "n", "type": "tool"},
        state={},
        started_at="2026-01-01T00:00:00+00:00",
    )

    async def activity_fn(_: NodeExecution) -> str:
        return "done"

    inbound = NodeLogInterceptor().intercept_activity(_Run(None))  # type: ignore[arg-type]
    call = ExecuteActivityInput(fn=activity_fn, args=[execution], executor=None, headers={})
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(
        environment.info, workflow_id="traced", activity_type="execute_node"
    )
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("RunActivity:execute_node") as span:
        assert await environment.run(inbound.execute_activity, call) == "done"
    trace_id = trace.format_trace_id(span.get_span_context().trace_id)
    logged = [line for line in lines(node_lines) if line.get("runId") == "traced"]
    assert [line["event"] for line in logged] == ["node_started", "node_finished"]
    assert {line["traceId"] for line in logged} == {trace_id}
    assert {line["nodeId"] for line in logged} == {"n"}
    assert logged[0]["message"] == "node n (tool) execute_node started, attempt 1"
