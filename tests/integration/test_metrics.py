"""The Prometheus metrics (``spindle.shared.platform.metrics``) move when runs, nodes, prompts and
streams do, and the worker serves them (ours and the Temporal SDK's) over HTTP.

The registry is process-wide, so every check compares values before and after.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from datetime import UTC, datetime

import httpx
import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from spindle.dev.embedded import TemporalDevServer
from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.runs import NodeStatus, PendingInput, RunStatus, UserInput
from spindle.shared.platform import metrics
from spindle.shared.platform.settings import Settings
from spindle.worker.activities.hitl import HitlActivities
from spindle.worker.activities.lifecycle import LifecycleActivities
from spindle.worker.activities.recorder import RunRecorder, build_report
from spindle.worker.contracts import (
    InputAcceptance,
    InputRequest,
    NodeExecution,
    RunFinish,
    RunRef,
)
from spindle.worker.telemetry.metrics_server import sdk_metrics_runtime, serve_metrics

pytestmark = pytest.mark.integration


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def new_run() -> RunRef:
    wf = f"metrics-{uuid.uuid4().hex[:12]}"
    return RunRef(workflow_id=wf, run_id="run-1", stream_id=wf, graph_name="g")


def execution(run: RunRef, node_id: str, node_type: str) -> NodeExecution:
    return NodeExecution(
        run=run,
        node=NodeSpec.model_validate({"id": node_id, "type": node_type}),
        state={"input": None, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


def env(activity_id: str) -> ActivityEnvironment:
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, activity_id=activity_id)
    return environment


def test_the_seed_names_are_exposed_in_text_format() -> None:
    text = metrics.render().decode()
    for name in (
        "agent_runs_started_total",
        "agent_runs_completed_total",
        "agent_node_executions_total",
        "agent_node_duration_seconds",
        "agent_runs_inflight",
        "agent_items_queue_length",
        "agent_prompts_pending",
        "spindle_sse_streams_open",
        "spindle_sse_messages_delivered_total",
        "spindle_sse_reconnects_total",
    ):
        assert f"# TYPE {name} " in text, name
    assert "_created" not in text


def test_stream_hooks_count_open_streams_deliveries_and_reconnects() -> None:
    open_before = value("spindle_sse_streams_open")
    delivered = value("spindle_sse_messages_delivered_total")
    reconnects = value("spindle_sse_reconnects_total")

    metrics.stream_opened(resumed=False)
    metrics.stream_opened(resumed=True)
    assert value("spindle_sse_streams_open") == open_before + 2
    assert value("spindle_sse_reconnects_total") == reconnects + 1
    metrics.messages_delivered(3)
    metrics.messages_delivered(0)
    assert value("spindle_sse_messages_delivered_total") == delivered + 3
    metrics.stream_closed()
    metrics.stream_closed()
    assert value("spindle_sse_streams_open") == open_before


async def test_node_reports_and_the_run_finish_move_the_worker_metrics(
    bus: MessageBus, activity_settings: Settings
) -> None:
    run = new_run()
    ex = execution(run, "count", "tool")
    labels = {"nodeType": "tool", "status": "SUCCESS"}
    executions = value("agent_node_executions_total", **labels)
    observed = value("agent_node_duration_seconds_count", nodeType="tool")
    fast = value("agent_node_duration_seconds_bucket", nodeType="tool", le="0.5")
    inflight = value("agent_runs_inflight")
    completed = value("agent_runs_completed_total", outcome="failed")

    # The recorder counts every report, also with the archive off.
    report = build_report(ex, NodeStatus.SUCCESS, duration_ms=250.0)
    limit = activity_settings.archive_port_data_max_bytes
    await RunRecorder(None, port_data_max_bytes=limit).save_report(ex, report)
    # A second node of the same run, through a recorder of its own.
    await RunRecorder(None, port_data_max_bytes=limit).save_report(ex, report)
    assert value("agent_node_executions_total", **labels) == executions + 2
    assert value("agent_node_duration_seconds_count", nodeType="tool") == observed + 2
    assert value("agent_node_duration_seconds_bucket", nodeType="tool", le="0.5") == fast + 2
    assert value("agent_runs_inflight") == inflight + 1  # one run, however many nodes

    await env("finish").run(
        LifecycleActivities(bus, settings=activity_settings).finish_run,
        RunFinish(run=run, status=RunStatus.FAILED, error="boom"),
    )
    assert value("agent_runs_completed_total", outcome="failed") == completed + 1
    assert value("agent_runs_inflight") == inflight


async def test_a_pending_prompt_is_counted_until_answered(
    bus: MessageBus, activity_settings: Settings
) -> None:
    run = new_run()
    ex = execution(run, "review", "prompt")
    pending = PendingInput(
        node_id="review",
        prompt="Approve?",
        ui_schema={"type": "object"},
        requested_at=datetime.now(UTC).isoformat(),
    )
    acts = HitlActivities(bus, settings=activity_settings)
    waiting = value("agent_prompts_pending")

    await env("ask").run(acts.request_input, InputRequest(execution=ex, pending=pending))
    await env("ask").run(acts.request_input, InputRequest(execution=ex, pending=pending))
    assert value("agent_prompts_pending") == waiting + 1  # a retried ask is one prompt

    answer = {"decision": "approve"}
    await env("answer").run(
        acts.accept_input,
        InputAcceptance(
            execution=ex, pending=pending, answer=answer, user_input=UserInput(data=answer)
        ),
    )
    assert value("agent_prompts_pending") == waiting

    # A run that ends while asking leaves no item behind.
    await env("ask-again").run(acts.request_input, InputRequest(execution=ex, pending=pending))
    assert value("agent_prompts_pending") == waiting + 1
    metrics.run_finished(run.workflow_id, RunStatus.CANCELED.value)
    assert value("agent_prompts_pending") == waiting


async def test_the_worker_serves_its_metrics_and_gives_up_a_taken_port_quietly() -> None:
    settings = Settings(worker_metrics_port=free_port())
    metrics.run_started()
    async with serve_metrics(settings) as port:
        assert port == settings.worker_metrics_port
        async with httpx.AsyncClient() as client:
            reply = await client.get(f"http://127.0.0.1:{port}/metrics")
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/plain")
        assert "agent_runs_started_total" in reply.text
        async with serve_metrics(settings) as second:
            assert second is None  # the port is taken: logged, the worker runs on
    # The server stopped with its context (the worker): nothing listens any more.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    async with serve_metrics(Settings(worker_metrics_port=0)) as off:
        assert off is None


def free_port_below_a_free_one() -> int:
    """A free port P whose P + 1 is free too (the SDK's metrics take P + 1)."""
    for _ in range(100):
        port = free_port()
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


async def test_temporal_sdk_metrics_are_served_on_the_next_port(
    temporal_server: TemporalDevServer,
) -> None:
    settings = Settings(worker_metrics_port=free_port_below_a_free_one())
    runtime = sdk_metrics_runtime(settings)
    assert runtime is not None
    client = await Client.connect(temporal_server.address, runtime=runtime)
    await client.count_workflows()
    async with httpx.AsyncClient() as http:
        reply = await http.get(f"http://127.0.0.1:{settings.worker_metrics_port + 1}/metrics")
    assert reply.status_code == 200
    assert "temporal_request" in reply.text


def test_runs_finished_elsewhere_do_not_pile_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "MAX_TRACKED", 2)
    for n in range(5):
        metrics.node_executed(f"elsewhere-{uuid.uuid4().hex}-{n}", "tool", "SUCCESS", 1.0)
    assert value("agent_runs_inflight") == 2
