"""Seed 000's run document and NodeMessage trace, kept by a real run.

Graphs run on an in-process worker against the session's dev server, Redis and
nx-27017; what is checked is what a reader of the MongoDB archive sees: the run
document's ``currentNodeId`` / ``pendingInput`` / ``portData`` moving with the
run, one ``run_trace`` document per NodeMessage, archived messages equal to the
Redis history, and the trace ids of the run's spans on all of it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client, WorkflowHandle

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
    SignalAck,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.run_trace import run_trace
from spindle.worker.examples import load_example
from spindle.worker.main import build_worker
from tests.integration.traced_temporal import named, traced_temporal_client
from tests.polling import eventually

pytestmark = pytest.mark.integration

TASK_QUEUE = f"run-doc-{uuid.uuid4().hex[:8]}"
TRACED_QUEUE = f"run-doc-traced-{uuid.uuid4().hex[:8]}"

TWO_QUESTIONS = {
    "name": "two-questions",
    "entry": "ask_name",
    "nodes": [
        {
            "id": "ask_name",
            "type": "prompt",
            "params": {
                "prompt": "Your name?",
                "ui_schema": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                },
            },
        },
        {
            "id": "ask_color",
            "type": "prompt",
            "params": {
                "prompt": "Your colour?",
                "ui_schema": {
                    "type": "object",
                    "properties": {"color": {"type": "string"}},
                    "required": ["color"],
                },
            },
        },
        {"id": "out", "type": "output", "params": {"select": "{name: ask_name.name}"}},
    ],
    "edges": [{"from": "ask_name", "to": "ask_color"}, {"from": "ask_color", "to": "out"}],
}


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
async def traced_client(settings: Settings, spans: InMemorySpanExporter) -> AsyncIterator[Client]:
    async with traced_temporal_client(settings, spans) as client:
        yield client


@pytest.fixture(scope="module")
async def untraced_worker(
    temporal_client: Client, settings: Settings, bus: MessageBus, archive: RunArchive
) -> AsyncIterator[None]:
    async with build_worker(
        temporal_client, settings, bus=bus, archive=archive, task_queue=TASK_QUEUE
    ):
        yield


@pytest.fixture(scope="module")
async def traced_worker(
    traced_client: Client, settings: Settings, bus: MessageBus, archive: RunArchive
) -> AsyncIterator[None]:
    async with build_worker(
        traced_client, settings, bus=bus, archive=archive, task_queue=TRACED_QUEUE
    ):
        yield


async def run_document(archive: RunArchive, workflow_id: str) -> dict[str, Any]:
    doc = await archive.runs.find_one({"_id": workflow_id})
    return doc or {}


async def answer(handle: WorkflowHandle[Any, Any], data: dict[str, Any]) -> None:
    ack = await handle.execute_update(
        USER_INPUT_UPDATE, UserInput(data=data), result_type=SignalAck
    )
    assert ack.status == "accepted"


async def waiting_at(archive: RunArchive, workflow_id: str, node: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        doc = await run_document(archive, workflow_id)
        pending = doc.get("pendingInput") or {}
        return doc if pending.get("nodeId") == node else None

    found: dict[str, Any] = await eventually(probe, what=f"{workflow_id} waits at {node}")
    return found


async def test_current_node_and_pending_input_move_with_the_run(
    untraced_worker: None, temporal_client: Client, archive: RunArchive, bus: MessageBus
) -> None:
    """Tracing is off here: nothing carries a trace id, and nothing breaks."""
    workflow_id = f"two-q-{uuid.uuid4().hex[:10]}"
    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=parse_graph(TWO_QUESTIONS), context={"locale": "fr"}),
        id=workflow_id,
        task_queue=TASK_QUEUE,
        result_type=GraphRunResult,
    )

    first = await waiting_at(archive, workflow_id, "ask_name")
    assert (first["workflowId"], first["status"]) == (workflow_id, RunStatus.PAUSED.value)
    assert first["currentNodeId"] == "ask_name" and first["current_nodes"] == ["ask_name"]
    assert first["pendingInput"]["uiSchema"]["required"] == ["name"]
    assert first["pendingInput"]["prompt"] == "Your name?"

    await answer(handle, {"name": "Ada"})
    second = await waiting_at(archive, workflow_id, "ask_color")
    assert second["currentNodeId"] == "ask_color" and second["current_nodes"] == ["ask_color"]
    assert second["portData"]["ask_name"] == {"output": {"name": "Ada"}}

    await answer(handle, {"color": "teal"})
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 30)
    assert result.status == RunStatus.COMPLETED
    done = await run_document(archive, workflow_id)
    assert (done["status"], done["pendingInput"], done["currentNodeId"]) == (
        "completed",
        None,
        None,
    )
    assert done["current_nodes"] == []
    assert done["portData"]["ask_color"] == {"output": {"color": "teal"}}
    assert done.get("traceId") is None

    trace = await run_trace(archive, workflow_id)
    prompts = [m for m in trace if m["role"] == "prompt"]
    assert [m["from"] for m in prompts] == ["ask_name", "ask_color"]
    assert all(m["meta"]["userInputNeeded"] for m in prompts)
    assert prompts[0]["meta"]["uiSchema"]["required"] == ["name"]
    assert all("traceId" not in m for m in trace)
    archived = await archive.archived_messages(workflow_id)
    assert archived and all("traceId" not in doc for doc in archived)


async def test_archive_matches_the_redis_history_and_names_the_runs_trace(
    traced_worker: None,
    traced_client: Client,
    archive: RunArchive,
    bus: MessageBus,
    spans: InMemorySpanExporter,
) -> None:
    workflow_id = f"approval-doc-{uuid.uuid4().hex[:10]}"
    handle = await traced_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=load_example("approval-flow"), input={"topic": "pricing"}, context={"team": "a"}
        ),
        id=workflow_id,
        task_queue=TRACED_QUEUE,
        result_type=GraphRunResult,
    )
    paused = await waiting_at(archive, workflow_id, "review")
    assert paused["currentNodeId"] == "review" and paused["context"] == {"team": "a"}
    assert paused["portData"]["draft"]["output"]["title"].startswith("Pricing")
    await answer(handle, {"decision": "approve"})
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 30)
    assert result.status == RunStatus.COMPLETED

    finished = list(spans.get_finished_spans())
    [start] = [s for s in named(finished, "StartWorkflow:") if _workflow(s) == workflow_id]
    trace_id = f"{start.context.trace_id:032x}"
    in_run = [s for s in finished if f"{s.context.trace_id:032x}" == trace_id]
    activity_spans = {f"{s.context.span_id:016x}" for s in named(in_run, "RunActivity:")}
    # The answer's update is handled in the run's trace.
    assert named(in_run, "HandleUpdate:UserInput")

    doc = await run_document(archive, workflow_id)
    assert (doc["status"], doc["pendingInput"], doc["currentNodeId"]) == ("completed", None, None)
    assert doc["traceId"] == trace_id
    assert set(doc["portData"]) >= {"draft", "review", "route", "publish", "result"}
    assert doc["portData"]["review"] == {"output": {"decision": "approve"}}
    assert "approved" in doc["portData"]["route"]  # the port the router chose

    # Every message of the stream is archived, byte for byte, with its trace.
    redis_history = await bus.history(workflow_id)
    archived = await archive.archived_messages(workflow_id)
    assert [(m.seq, m.ts, m.raw.decode()) for m in redis_history] == [
        (d["seq"], d["ts"], d["raw"]) for d in archived
    ]
    assert {d["traceId"] for d in archived} == {trace_id}
    assert {d["spanId"] for d in archived} <= activity_spans

    # One trace document per NodeMessage: each report's input and output
    # envelopes, plus the prompt's userInputNeeded message.
    reports = await archive.node_reports(workflow_id)
    envelopes = [r[side] for r in reports for side in ("input", "output") if r.get(side)]
    trace = await run_trace(archive, workflow_id)
    assert len(trace) == len(envelopes) + 1
    assert {m["messageId"] for m in trace} == {e["messageId"] for e in envelopes} | {
        m["messageId"] for m in trace if m["role"] == "prompt"
    }
    assert len({m["messageId"] for m in trace}) == len(trace)
    assert trace[0]["nodeId"] == "draft" and trace[0]["role"] == "input"
    assert trace[-1]["nodeId"] == "result" and trace[-1]["role"] == "output"
    assert {m["traceId"] for m in trace} == {trace_id}
    assert {m["spanId"] for m in trace} <= activity_spans
    assert doc["trace"] == {"collection": "run_trace", "lastMessageId": trace[-1]["messageId"]}


def _workflow(span: ReadableSpan) -> Any:
    return (span.attributes or {}).get("temporalWorkflowID")
