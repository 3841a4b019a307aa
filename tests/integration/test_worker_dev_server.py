"""The worker (``build_worker`` and ``python -m spindle.worker.main``) on the real dev server.

Every example graph runs start to finish through the ``GraphRun`` workflow and
the real activities, Redis bus and Mongo archive; what is checked is what a user
sees: the run's result, its node reports and the messages on its stream.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.worker import Worker

from spindle.dev.processes import ManagedProcess, python_module
from spindle.nodes import NodeContext, NodeResult, node_type
from spindle.shared.bus.message_bus import MessageBus, live_channel, parse_live_payload
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
    RunDescription,
    RunStatus,
    SignalAck,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.examples import load_example
from spindle.worker.main import build_worker, run_worker
from tests.polling import eventually

pytestmark = pytest.mark.integration

TASK_QUEUE = f"w2-examples-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
async def bus(settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(settings)
    yield bus
    await bus.close()


@pytest.fixture(scope="module")
async def archive(settings: Settings) -> AsyncIterator[RunArchive]:
    archive = RunArchive.from_settings(settings)
    yield archive
    await archive.close()


@pytest.fixture(scope="module")
async def worker(
    temporal_client: Client, settings: Settings, bus: MessageBus, archive: RunArchive
) -> AsyncIterator[Worker]:
    worker = build_worker(
        temporal_client, settings, bus=bus, archive=archive, task_queue=TASK_QUEUE
    )
    async with worker:
        yield worker


async def start(
    client: Client, graph: str, run_input: Any, **extra: Any
) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=load_example(graph), input=run_input, **extra),
        id=f"{graph}-{uuid.uuid4().hex[:10]}",
        task_queue=TASK_QUEUE,
        result_type=GraphRunResult,
    )


async def messages(bus: MessageBus, stream_id: str) -> list[dict[str, Any]]:
    return [orjson.loads(m.raw) for m in await bus.history(stream_id)]


def reports(result: GraphRunResult) -> dict[str, NodeStatus]:
    return {r.node_id: r.status for r in result.node_reports}


async def test_research_agent_answers_with_its_tools(
    worker: Worker, temporal_client: Client, bus: MessageBus, archive: RunArchive
) -> None:
    question = "How much is the team plan for 12 seats? 45 * 12"
    handle = await start(temporal_client, "research-agent", {"question": question})
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)

    assert result.status == RunStatus.COMPLETED
    assert "45 * 12 = 540" in result.output and "45 dollars" in result.output
    assert reports(result) == {"researcher": NodeStatus.SUCCESS, "answer": NodeStatus.SUCCESS}
    stream = await messages(bus, handle.id)
    types = [m["t"] for m in stream if m["t"] != T.BATCH_PROGRESS]
    assert types == [T.THOUGHT, T.UPDATE, T.UPDATE, T.ANSWER, T.COMPLETE]
    # The two tool calls of one turn run as a batch; each reports where it stands.
    batch = [m for m in stream if m["t"] == T.BATCH_PROGRESS]
    assert sorted(m["d"]["batch_index"] for m in batch) == [1, 2]
    assert {m["d"]["batch_size"] for m in batch} == {2}
    assert {m["m"] for m in stream if m["t"] == T.UPDATE} == {
        "Using tool search_notes",
        "Using tool calculator",
    }
    assert stream[-1]["d"] == {"status": "completed"}
    # Activity ids are the readable ones of the worker contract (tool calls run in
    # parallel, so their two UPDATEs may come in either order).
    ids = [m["i"] for m in stream if m["t"] != T.BATCH_PROGRESS]
    assert ids[0] == "researcher.1.t1" and ids[3:] == ["researcher.1.t2", "finish"]
    assert sorted(ids[1:3]) == [
        "researcher.1.t1.call_1_search_notes",
        "researcher.1.t1.call_2_calculator",
    ]
    archived = {r["node_id"] for r in await archive.node_reports(handle.id)}
    assert archived == {"researcher", "answer"}


@pytest.mark.parametrize(
    ("text", "chosen", "skipped", "priority"),
    [
        (
            "The export is broken and slow, I want a refund. Export broken again!",
            "escalation",
            "summary",
            "high",
        ),
        ("Great product, the export is fast and easy. Thanks!", "summary", "escalation", "normal"),
    ],
)
async def test_pipeline_follows_conditions_and_propagates_metadata(
    worker: Worker,
    temporal_client: Client,
    bus: MessageBus,
    text: str,
    chosen: str,
    skipped: str,
    priority: str,
) -> None:
    handle = await start(temporal_client, "pipeline", {"text": text}, meta={"source": "email"})
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)

    assert result.status == RunStatus.COMPLETED
    assert result.output["priority"] == priority
    assert "export" in result.output["keywords"]
    assert result.output["tools"] == ["extract_keywords", "sentiment"]
    assert result.output["source"] == "email"
    assert reports(result) == {
        "keywords": NodeStatus.SUCCESS,
        "mood": NodeStatus.SUCCESS,
        chosen: NodeStatus.SUCCESS,
        skipped: NodeStatus.SKIPPED,
    }
    stream = await messages(bus, handle.id)
    [answer] = [m for m in stream if m["t"] == T.ANSWER]
    assert answer["i"] == f"{chosen}.1"
    assert "export" in answer["m"]
    assert stream[-1]["t"] == T.COMPLETE


async def wait_for_message(pubsub: Any, wanted: T, timeout: float = 30.0) -> dict[str, Any]:
    """The next live message of type ``wanted`` on a subscribed channel."""

    async def next_match() -> dict[str, Any]:
        while True:
            event = await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
            if event is None:
                continue
            message = orjson.loads(parse_live_payload(event["data"]).raw)
            if message["t"] == wanted:
                return message  # type: ignore[no-any-return]

    return await asyncio.wait_for(next_match(), timeout)


@pytest.mark.parametrize(
    ("answer", "branch", "other"),
    [
        ({"decision": "approve"}, "publish", "revise"),
        (
            {"decision": "reject", "comment": "Shorter please, cite the pricing notes"},
            "revise",
            "publish",
        ),
    ],
)
async def test_approval_flow_waits_for_a_valid_human_answer(
    worker: Worker,
    temporal_client: Client,
    bus: MessageBus,
    archive: RunArchive,
    answer: dict[str, Any],
    branch: str,
    other: str,
) -> None:
    workflow_id = f"approval-flow-{uuid.uuid4().hex[:10]}"
    pubsub = bus.redis.pubsub()
    await pubsub.subscribe(live_channel(workflow_id))
    try:
        handle = await temporal_client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=load_example("approval-flow"), input={"topic": "pricing"}),
            id=workflow_id,
            task_queue=TASK_QUEUE,
            result_type=GraphRunResult,
        )
        ask = await wait_for_message(pubsub, T.REQUEST_INPUT)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
    assert ask["d"]["node_id"] == "review"
    assert ask["d"]["ui_schema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
    described = await handle.query(DESCRIBE_QUERY, result_type=RunDescription)
    assert described.status == RunStatus.PAUSED
    assert described.pending_input is not None and described.pending_input.node_id == "review"

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(
            USER_INPUT_UPDATE, UserInput(data={"decision": "maybe"}), result_type=SignalAck
        )
    assert "decision" in str(refused.value.cause)
    ack = await handle.execute_update(
        USER_INPUT_UPDATE,
        UserInput(data=answer, client_message_id="m-1"),
        result_type=SignalAck,
    )
    assert ack.status == "accepted"
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)

    assert result.status == RunStatus.COMPLETED
    assert result.output["decision"] == answer["decision"]
    assert result.output["title"].startswith("Pricing")
    key = {"publish": "stats", "revise": "keywords"}
    assert result.output[key[other]] is None
    if branch == "publish":
        assert result.output["stats"]["words"] > 10  # word_count of the approved draft
    else:
        assert result.output["keywords"] == ["cite", "notes", "please"]  # from the comment
    statuses = reports(result)
    assert statuses[branch] == NodeStatus.SUCCESS and statuses[other] == NodeStatus.SKIPPED
    stream = await messages(bus, handle.id)
    [question] = [m for m in stream if m["t"] == T.QUESTION]
    # Sent straight to Temporal, not through the gateway: no authenticated user.
    assert question["d"] == {"node_id": "review", "client_message_id": "m-1", "user_id": None}
    [final] = [m for m in stream if m["t"] == T.ANSWER]
    assert final["m"] == f"Draft {result.output['title']}: {answer['decision']}"
    record = await archive.get_run(handle.id)
    # The gateway creates run documents; started directly, there may be none.
    if record is not None:
        assert record.status == "completed"


async def test_python_m_worker_main_serves_runs_and_stops_on_sigterm(
    settings: Settings, temporal_client: Client, archive: RunArchive, tmp_path: Path
) -> None:
    queue = f"w2-main-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    proc = ManagedProcess(
        "worker",
        python_module("spindle.worker.main"),
        log_path=log,
        env={"SPINDLE_TASK_QUEUE": queue},
        ready=lambda: "polling task queue" in log.read_text(errors="replace"),
        ready_timeout=60,
    )
    await asyncio.to_thread(proc.start)
    try:
        started = log.read_text()
        assert f"polling task queue '{queue}' on Temporal {settings.temporal_address}" in started
        assert settings.redis_url in started and settings.mongo_url in started
        catalog = await archive.get_catalog()
        assert catalog is not None and catalog.tools_known
        builtin_tools = {"search_notes", "calculator", "word_count", "draft_document"}
        assert builtin_tools <= set(catalog.tools)

        handle = await temporal_client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=load_example("pipeline"), input={"text": "fast easy export"}),
            id=f"main-{uuid.uuid4().hex[:10]}",
            task_queue=queue,
            result_type=GraphRunResult,
        )
        result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)
        assert result.status == RunStatus.COMPLETED
    finally:
        await asyncio.to_thread(proc.stop)
    assert proc.proc is not None and proc.proc.returncode == 0
    assert "worker stopped" in log.read_text()


class Gate:
    """Lets a test hold a node mid-execution and see how it ended."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = False


GATE = Gate()


@node_type("test_gated")
async def gated(ctx: NodeContext) -> NodeResult:
    """Waits for the test to release it."""
    GATE.entered.set()
    try:
        await GATE.release.wait()
    except asyncio.CancelledError:
        GATE.cancelled = True
        raise
    return NodeResult(data="finished during drain")


async def test_stopping_the_worker_drains_running_activities(
    settings: Settings,
    temporal_client: Client,
    bus: MessageBus,
    archive: RunArchive,
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue = f"w2-drain-{uuid.uuid4().hex[:8]}"
    stop = asyncio.Event()
    caplog.set_level(logging.INFO, logger="spindle.worker.main")
    running = asyncio.create_task(
        run_worker(settings.model_copy(update={"task_queue": queue}), stop=stop)
    )
    graph = parse_graph(
        {
            "name": "drain",
            "entry": "hold",
            "nodes": [{"id": "hold", "type": "test_gated"}, {"id": "out", "type": "output"}],
            "edges": [{"from": "hold", "to": "out"}],
        }
    )
    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=graph),
        id=f"drain-{uuid.uuid4().hex[:10]}",
        task_queue=queue,
        result_type=GraphRunResult,
    )
    await asyncio.wait_for(GATE.entered.wait(), 30)

    stop.set()  # what SIGTERM does
    await eventually(
        lambda: any("draining" in r.getMessage() for r in caplog.records),
        what="worker starts draining",
        timeout=10,
        interval=0.01,
        alive=lambda: not running.done(),
    )
    GATE.release.set()
    await asyncio.wait_for(running, 30)
    assert not GATE.cancelled
    assert any(r.getMessage() == "worker stopped" for r in caplog.records)

    # The drained activity's result was recorded: a new worker finishes the run
    # without retrying the node.
    async with build_worker(temporal_client, settings, bus=bus, archive=archive, task_queue=queue):
        result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)
    assert result.output == "finished during drain"
    [hold] = [r for r in result.node_reports if r.node_id == "hold"]
    assert (hold.status, hold.attempt) == (NodeStatus.SUCCESS, 1)
