"""The graph-run activities against the real Redis bus and Mongo wire server.

Each activity runs in ``temporalio.testing.ActivityEnvironment`` with the activity
id and attempt Temporal would give it; what is checked is what a client sees:
the messages on the run's stream, the run document and the archived reports.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from pymongo import AsyncMongoClient
from temporalio.exceptions import ApplicationError

from spindle.dev.processes import free_port
from spindle.nodes import ClosingPost, NodeContext, NodeResult, node_type
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.runs import NodeStatus, PendingInput, RunStatus, UserInput
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.worker.activities.agent import AgentActivities, tool_message
from spindle.worker.activities.hitl import HitlActivities
from spindle.worker.activities.lifecycle import LifecycleActivities
from spindle.worker.activities.nodes import NodeActivities
from spindle.worker.contracts import (
    InputAcceptance,
    InputRequest,
    LlmTurnInput,
    NodeExecution,
    RunFinish,
    RunNotice,
    RunRef,
    ToolCall,
    ToolCallInput,
)
from spindle.worker.llm.offline import OfflineProvider
from tests.integration.activity_env import env
from tests.polling import eventually

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def io_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(redis_url=redis_url, mongo_url=mongo_url, mongo_db="spindle_activities")


@pytest.fixture(scope="module")
async def bus(io_settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(io_settings)
    yield bus
    await bus.close()


@pytest.fixture(scope="module")
async def archive(io_settings: Settings) -> AsyncIterator[RunArchive]:
    archive = RunArchive.from_settings(io_settings)
    await archive.ensure_indexes()
    yield archive
    await archive.close()


def new_run() -> RunRef:
    wf = f"act-{uuid.uuid4().hex[:12]}"
    return RunRef(workflow_id=wf, run_id="run-1", stream_id=wf, graph_name="g")


def execution(run: RunRef, node: dict[str, Any], **state: Any) -> NodeExecution:
    return NodeExecution(
        run=run,
        node=NodeSpec.model_validate(node),
        state={"input": None, "context": {}, "meta": {}, **state},
        started_at=datetime.now(UTC).isoformat(),
    )


async def stream(bus: MessageBus, run: RunRef) -> list[dict[str, Any]]:
    return [orjson.loads(m.raw) for m in await bus.history(run.stream_id)]


async def test_tool_node_posts_progress_and_archives_its_report(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(
        run,
        {
            "id": "count",
            "type": "tool",
            "params": {"tool": "word_count"},
            "inputs": {"args": "{text: input.text}"},
        },
        input={"text": "one two three. four!"},
    )
    outcome = await env("count.1").run(acts.execute_node, ex)

    assert outcome.output == {"words": 4, "characters": 20, "sentences": 2}
    assert outcome.meta == {"tools_used": ["word_count"], "tools_used_count": 1}
    assert outcome.report.status == NodeStatus.SUCCESS
    assert outcome.report.output_summary == '{"words":4,"characters":20,"sentences":2}'
    messages = await stream(bus, run)
    assert [(m["t"], m["m"]) for m in messages] == [
        (T.UPDATE, "Calling tool word_count"),
        (T.UPDATE, 'Tool word_count returned {"words":4,"characters":20,"sentences":2}'),
    ]
    assert all(m["i"] == "count.1" and "w" not in m for m in messages)

    [report] = await archive.node_reports(run.workflow_id)
    assert report["node_id"] == "count" and report["status"] == "SUCCESS"
    assert report["input"]["payload"] == {
        "tool": "word_count",
        "args": {"text": "one two three. four!"},
    }
    assert report["output"]["payload"]["words"] == 4
    assert report["output"]["from"] == "count" and report["output"]["type"] == "NodeMessage"
    archived = await archive.messages(run.stream_id)
    assert [m.raw for m in archived] == [m.raw for m in await bus.history(run.stream_id)]


async def test_a_retried_attempt_announces_itself_and_posts_nothing_twice(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(
        run,
        {
            "id": "calc",
            "type": "tool",
            "params": {"tool": "calculator", "args": {"expression": "6*7"}},
        },
    )
    first = await env("calc.1", attempt=1).run(acts.execute_node, ex)
    second = await env("calc.1", attempt=2).run(acts.execute_node, ex)
    again = await env("calc.1", attempt=2).run(acts.execute_node, ex)

    assert first.output == second.output == again.output == 42
    assert second.report.attempt == 2
    types = [m["t"] for m in await stream(bus, run)]
    assert types == [T.UPDATE, T.UPDATE, T.RESTARTING]
    restarting = (await stream(bus, run))[2]
    assert restarting["m"] == "retrying node calc (attempt 2)"


async def test_a_late_older_attempt_lands_nothing_once_a_newer_one_has_started(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(
        run,
        {
            "id": "calc",
            "type": "tool",
            "params": {"tool": "calculator", "args": {"expression": "6*7"}},
        },
    )
    # Attempt 2 runs (attempt 1's worker was lost past the heartbeat timeout) ...
    second = await env("calc.1", attempt=2).run(acts.execute_node, ex)
    # ... then attempt 1 wakes up and runs to its end: it is refused.
    with pytest.raises(ApplicationError) as exc:
        await env("calc.1", attempt=1).run(acts.execute_node, ex)
    assert exc.value.type == "AttemptSuperseded" and exc.value.non_retryable

    assert second.output == 42
    messages = await stream(bus, run)
    assert [m["t"] for m in messages] == [T.RESTARTING, T.UPDATE, T.UPDATE]
    assert {m["d"]["attempt"] for m in messages} == {2}
    [report] = await archive.node_reports(run.workflow_id)
    assert report["attempt"] == 2


async def test_bad_params_fail_without_retry_naming_node_and_field(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, None, settings=io_settings)
    ex = execution(run, {"id": "r", "type": "router", "params": {"routes": []}})
    with pytest.raises(ApplicationError) as exc:
        await env("r.1").run(acts.execute_node, ex)
    assert exc.value.type == "InvalidParams" and exc.value.non_retryable
    assert "node 'r'" in str(exc.value) and "params.routes" in str(exc.value)

    bad_args = execution(
        run, {"id": "t", "type": "tool", "params": {"tool": "calculator", "args": {"expr": "1"}}}
    )
    with pytest.raises(ApplicationError) as exc:
        await env("t.1").run(acts.execute_node, bad_args)
    assert exc.value.type == "InvalidParams" and "expression" in str(exc.value)


async def test_unknown_node_type_fails_without_retry(
    bus: MessageBus, io_settings: Settings
) -> None:
    acts = NodeActivities(bus, None, settings=io_settings)
    ex = execution(new_run(), {"id": "x", "type": "no-such-type"})
    with pytest.raises(ApplicationError) as exc:
        await env("x.1").run(acts.execute_node, ex)
    assert exc.value.type == "ExecutorNotFound" and exc.value.non_retryable
    assert "no-such-type" in str(exc.value)


_OVERTAKEN: dict[str, asyncio.Event] = {}
"""Per run: set once a newer attempt has run, to let the older one go on."""


@node_type("test_overtaken")
async def overtaken(ctx: NodeContext) -> NodeResult:
    """Posts, waits (attempt 1) until a newer attempt has run, then returns; ends
    with a closing message when the previous output says so."""
    await ctx.poster.post(T.UPDATE, "working")  # a retried attempt's repeat is a no-op
    if ctx.poster.attempt == 1:
        await _OVERTAKEN[ctx.run.workflow_id].wait()
    done = ClosingPost(type=T.UPDATE, text=f"done (attempt {ctx.poster.attempt})")
    return NodeResult(data=ctx.poster.attempt, closing=done if ctx.previous else None)


@pytest.mark.parametrize("closing", [True, False], ids=["closing-post", "no-closing-post"])
async def test_an_attempt_overtaken_while_it_runs_is_refused_at_its_end(
    bus: MessageBus, archive: RunArchive, closing: bool, io_settings: Settings
) -> None:
    # Its end checks the fence once more (with its closing post, or alone): what
    # it did before the newer attempt started stays; nothing after is recorded.
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(run, {"id": "slow", "type": "test_overtaken"}, _previous=closing)
    _OVERTAKEN[run.workflow_id] = asyncio.Event()
    first = asyncio.create_task(env("slow.1", attempt=1).run(acts.execute_node, ex))

    async def first_posted() -> bool:
        return len(await stream(bus, run)) == 1

    await eventually(first_posted, what="attempt 1's first post")
    second = await env("slow.1", attempt=2).run(acts.execute_node, ex)
    _OVERTAKEN.pop(run.workflow_id).set()
    with pytest.raises(ApplicationError) as refused:
        await first
    assert refused.value.type == "AttemptSuperseded"

    assert second.output == 2
    texts = [m["m"] for m in await stream(bus, run)]
    assert texts == [
        "working",
        "retrying node slow (attempt 2)",
        *(["done (attempt 2)"] if closing else []),
    ]
    [report] = await archive.node_reports(run.workflow_id)
    assert report["attempt"] == 2 and report["output"]["payload"] == 2


@node_type("test_legacy_upper")
async def legacy_upper(ctx: NodeContext) -> Any:
    """A custom node returning a bare value (the legacy form)."""
    return str(ctx.previous).upper()


async def test_legacy_raw_outputs_are_wrapped_with_a_deprecation_warning(
    bus: MessageBus, archive: RunArchive, caplog: pytest.LogCaptureFixture, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(run, {"id": "up", "type": "test_legacy_upper"}, _previous="quiet")
    with caplog.at_level(logging.WARNING, logger="spindle.worker.activities.nodes"):
        outcome = await env("up.1").run(acts.execute_node, ex)
    assert outcome.output == "QUIET"
    assert any("deprecated" in r.getMessage() and "up" in r.getMessage() for r in caplog.records)
    [report] = await archive.node_reports(run.workflow_id)
    assert report["output"]["payload"] == "QUIET"
    assert report["output"]["meta"]["status"] == "done"


async def test_a_failing_node_archives_a_failed_report_and_raises(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, archive, settings=io_settings)
    ex = execution(
        run,
        {
            "id": "div",
            "type": "tool",
            "params": {"tool": "calculator", "args": {"expression": "1/0"}},
        },
    )
    with pytest.raises(ApplicationError) as exc:
        await env("div.1").run(acts.execute_node, ex)
    assert exc.value.type == "ToolError" and "division by zero" in str(exc.value)
    [report] = await archive.node_reports(run.workflow_id)
    assert report["status"] == "FAILED" and "division by zero" in report["error"]
    assert report["output"]["meta"]["status"] == "error"


async def test_router_chooses_ports_and_passes_data_through(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, None, settings=io_settings)
    node = {
        "id": "route",
        "type": "router",
        "params": {
            "routes": [{"when": "review.decision == 'approve'", "port": "approved"}],
            "default": "rejected",
        },
    }
    yes = await env("route.1").run(
        acts.execute_node, execution(run, node, review={"decision": "approve"}, _previous="d")
    )
    no = await env("route.2").run(
        acts.execute_node, execution(run, node, review={"decision": "reject"}, _previous="d")
    )
    assert (yes.ports, yes.output) == (["approved"], "d")
    assert (no.ports, no.output) == (["rejected"], "d")
    assert [m["m"] for m in await stream(bus, run)] == [
        "Route: approved",
        "Route: rejected (default)",
    ]


async def test_output_node_selects_and_announces_the_answer(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, None, settings=io_settings)
    node = {
        "id": "out",
        "type": "output",
        "params": {
            "select": "{n: calc, who: input.name}",
            "message": "{{ input.name }}: {{ output.n }}",
        },
    }
    outcome = await env("out.1").run(
        acts.execute_node, execution(run, node, input={"name": "Ada"}, calc=42)
    )
    assert outcome.output == {"n": 42, "who": "Ada"}
    [answer] = await stream(bus, run)
    assert (answer["t"], answer["m"]) == (T.ANSWER, "Ada: 42")


async def test_output_node_without_a_message_posts_nothing(
    bus: MessageBus, io_settings: Settings
) -> None:
    """The answer an agent already posted is not repeated by the output node."""
    run = new_run()
    acts = NodeActivities(bus, None, settings=io_settings)
    node = {"id": "out", "type": "output", "params": {"select": "agent"}}
    outcome = await env("out.1").run(
        acts.execute_node, execution(run, node, agent="the agent's answer")
    )
    assert outcome.output == "the agent's answer"
    assert await stream(bus, run) == []


async def test_agent_turns_and_tool_calls_with_the_offline_model(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    acts = AgentActivities(bus, archive, OfflineProvider(), settings=io_settings)
    node = {
        "id": "agent",
        "type": "agent",
        "params": {"prompt": "{{ input.q }}", "tools": ["search_notes", "calculator"]},
    }
    ex = execution(run, node, input={"q": "What does the team plan cost for 3 seats: 45 * 3?"})

    first = await env("agent.1.t1").run(
        acts.llm_turn, LlmTurnInput(execution=ex, turn=1, messages=[])
    )
    assert not first.final and first.report is None
    calls = {c.name: c for c in first.message.tool_calls}
    assert calls["calculator"].arguments == {"expression": "45 * 3"}
    assert "team plan" in calls["search_notes"].arguments["query"]

    size = len(first.message.tool_calls)
    results = [
        await env(f"agent.1.t1.{c.id}").run(
            acts.tool_call,
            ToolCallInput(execution=ex, turn=1, call=c, batch_index=i, batch_size=size),
        )
        for i, c in enumerate(first.message.tool_calls, start=1)
    ]
    assert all(r.ok for r in results)
    assert orjson.loads(results[1].content) == 135
    history = [first.message, *(tool_message(r) for r in results)]
    second = await env("agent.1.t2").run(
        acts.llm_turn, LlmTurnInput(execution=ex, turn=2, messages=history)
    )
    assert second.final and "45 * 3 = 135" in (second.message.content or "")
    assert "45 dollars" in (second.message.content or "")
    assert second.report is not None and second.report.status == NodeStatus.SUCCESS

    messages = await stream(bus, run)
    assert [m["t"] for m in messages] == [
        T.THOUGHT,
        T.UPDATE,
        T.BATCH_PROGRESS,
        T.UPDATE,
        T.BATCH_PROGRESS,
        T.ANSWER,
    ]
    assert messages[0]["d"]["tool_calls"][0]["name"] == "search_notes"
    assert [m["m"] for m in messages[1::2][:2]] == [
        "Using tool search_notes",
        "Using tool calculator",
    ]
    # The two calls of the turn form a batch: each reports where the batch stands.
    assert [m["m"] for m in messages[2:5:2]] == [
        "tool 1 of 2 (search_notes) done",
        "tool 2 of 2 (calculator) done",
    ]
    assert messages[4]["d"]["batch_size"] == 2
    assert messages[5]["m"] == second.message.content
    [report] = await archive.node_reports(run.workflow_id)
    assert report["node_id"] == "agent" and report["output"]["payload"] == second.message.content


async def test_tool_errors_go_back_to_the_model(bus: MessageBus, io_settings: Settings) -> None:
    run = new_run()
    acts = AgentActivities(bus, None, OfflineProvider(), settings=io_settings)
    ex = execution(run, {"id": "a", "type": "agent", "params": {"tools": ["calculator"]}})
    bad = await env("a.1.t1.c1").run(
        acts.tool_call,
        ToolCallInput(
            execution=ex,
            turn=1,
            call=ToolCall(id="c1", name="calculator", arguments={"expression": "2 +"}),
        ),
    )
    assert not bad.ok and "not an arithmetic expression" in orjson.loads(bad.content)["error"]
    not_offered = await env("a.1.t1.c2").run(
        acts.tool_call,
        ToolCallInput(
            execution=ex, turn=1, call=ToolCall(id="c2", name="word_count", arguments={"text": "x"})
        ),
    )
    assert not not_offered.ok and "not offered" in orjson.loads(not_offered.content)["error"]


async def test_prompt_asks_pauses_then_accepts_and_resumes(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    run = new_run()
    now = datetime.now(UTC)
    await archive.create_run(
        RunRecord(
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            graph_name="g",
            status="running",
            created_at=now,
            updated_at=now,
        )
    )
    acts = HitlActivities(bus, archive, settings=io_settings)
    ex = execution(run, {"id": "review", "type": "prompt"})
    schema = {
        "type": "object",
        "properties": {"decision": {"enum": ["approve", "reject"]}},
        "required": ["decision"],
    }
    pending = PendingInput(
        node_id="review", prompt="Approve?", ui_schema=schema, requested_at=now.isoformat()
    )

    await env("review.1.ask").run(acts.request_input, InputRequest(execution=ex, pending=pending))
    [ask] = await stream(bus, run)
    assert (ask["t"], ask["m"]) == (T.REQUEST_INPUT, "Approve?")
    assert ask["d"] == {"node_id": "review", "ui_schema": schema, "prompt": "Approve?"}
    record = await archive.get_run(run.workflow_id)
    assert record is not None and record.status == "paused"
    assert record.pending_input is not None and record.pending_input["node_id"] == "review"

    answer = {"decision": "approve"}
    outcome = await env("review.1.answer").run(
        acts.accept_input,
        InputAcceptance(
            execution=ex,
            pending=pending,
            answer=answer,
            user_input=UserInput(data=answer, client_message_id="cm-1"),
        ),
    )
    assert outcome.output == answer and outcome.report.status == NodeStatus.SUCCESS
    echo = (await stream(bus, run))[1]
    assert (echo["t"], echo["m"]) == (T.QUESTION, '{"decision":"approve"}')
    assert echo["d"] == {"node_id": "review", "client_message_id": "cm-1", "user_id": None}
    record = await archive.get_run(run.workflow_id)
    assert record is not None and record.status == "running" and record.pending_input is None
    [report] = await archive.node_reports(run.workflow_id)
    assert report["node_id"] == "review" and report["output"]["payload"] == answer


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (RunStatus.COMPLETED, [(T.COMPLETE, {"status": "completed"})]),
        (RunStatus.FAILED, [(T.ERROR, {"error": "boom"}), (T.COMPLETE, {"status": "failed"})]),
        (RunStatus.CANCELED, [(T.TERMINATED, {"status": "canceled"})]),
    ],
)
async def test_finish_run_posts_the_closing_messages_and_ends_the_stream(
    bus: MessageBus,
    archive: RunArchive,
    status: RunStatus,
    expected: list[tuple[int, dict[str, Any]]],
    io_settings: Settings,
) -> None:
    run = new_run()
    now = datetime.now(UTC)
    await archive.create_run(
        RunRecord(
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            graph_name="g",
            status="running",
            current_nodes=["x"],
            created_at=now,
            updated_at=now,
        )
    )
    acts = LifecycleActivities(bus, archive, settings=io_settings)
    error = "boom" if status == RunStatus.FAILED else None
    await env("finish").run(
        acts.finish_run, RunFinish(run=run, status=status, output={"ok": 1}, error=error)
    )
    messages = await stream(bus, run)
    assert [(m["t"], m["d"]) for m in messages] == expected
    assert await bus.end_seq(run.stream_id) == len(expected)
    record = await archive.get_run(run.workflow_id)
    assert record is not None
    assert (record.status, record.error, record.current_nodes) == (status.value, error, [])

    late = await env("late").run(
        acts.post_message, RunNotice(run=run, type=int(T.WARNING), text="too late")
    )
    assert late is not None
    assert len(await stream(bus, run)) == len(expected)


async def test_post_message_posts_a_workflow_notice(bus: MessageBus, io_settings: Settings) -> None:
    run = new_run()
    acts = LifecycleActivities(bus, None, settings=io_settings)
    notice = RunNotice(
        run=run, type=int(T.WARNING), text="loop bound reached", details={"edge": "b->a"}
    )
    await env("warn.b.1").run(acts.post_message, notice)
    await env("warn.b.1").run(acts.post_message, notice)  # a retry: no duplicate
    assert [(m["t"], m["m"], m["d"]) for m in await stream(bus, run)] == [
        (T.WARNING, "loop bound reached", {"edge": "b->a"})
    ]


async def test_nodes_succeed_when_mongo_is_down(bus: MessageBus, io_settings: Settings) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{free_port()}", serverSelectionTimeoutMS=200, connectTimeoutMS=200
    )
    down = RunArchive(client, "nowhere")
    try:
        run = new_run()
        acts = NodeActivities(bus, down, settings=io_settings)
        node = {"id": "o", "type": "output", "params": {"message": "{{ _previous }}"}}
        ex = execution(run, node, _previous="still here")
        outcome = await env("o.1").run(acts.execute_node, ex)
        assert outcome.output == "still here"
        assert [m["m"] for m in await stream(bus, run)] == ["still here"]
    finally:
        await down.close()


async def test_workstream_messages_carry_their_workstream(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run().model_copy(update={"workstream_id": "ws-research"})
    acts = NodeActivities(bus, None, settings=io_settings)
    node = {"id": "o", "type": "output", "params": {"message": "{{ _previous }}"}}
    await env("o.1").run(acts.execute_node, execution(run, node, _previous="child says hi"))
    [message] = await stream(bus, run)
    assert message["w"] == "ws-research"


_released = asyncio.Event()


@node_type("test_waits_for_heartbeat")
async def waits_for_heartbeat(ctx: NodeContext) -> NodeResult:
    """Blocks until the activity has heartbeated (set by the test's callback)."""
    await _released.wait()
    return NodeResult(data="released")


async def test_long_nodes_heartbeat_while_they_run(bus: MessageBus, io_settings: Settings) -> None:
    acts = NodeActivities(bus, None, settings=io_settings)
    environment = env("slow.1")
    environment.info = dataclasses.replace(
        environment.info, heartbeat_timeout=timedelta(milliseconds=300)
    )
    beats: list[tuple[Any, ...]] = []

    def on_heartbeat(*details: Any) -> None:
        beats.append(details)
        _released.set()

    environment.on_heartbeat = on_heartbeat
    ex = execution(new_run(), {"id": "slow", "type": "test_waits_for_heartbeat"})
    outcome = await asyncio.wait_for(environment.run(acts.execute_node, ex), 10)
    assert outcome.output == "released"
    assert beats[0] == ("slow",)


HELD = asyncio.Event()


@node_type("test_held_node")
async def _held_node(ctx: NodeContext) -> NodeResult:
    await HELD.wait()
    return NodeResult(data="released")


async def test_the_run_document_names_the_node_that_runs(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    acts = NodeActivities(bus, archive, settings=io_settings)

    # A quick node: its start is recorded with its end, in the same write.
    quick = new_run()
    await env("count.1").run(
        acts.execute_node,
        execution(
            quick,
            {
                "id": "count",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            context={"team": "a"},
        ),
    )
    doc = await archive.runs.find_one({"_id": quick.workflow_id})
    assert doc is not None
    # (created by this write, whose $pull leaves no current_nodes field behind)
    assert doc["currentNodeId"] == "count" and not doc.get("current_nodes")
    assert (doc["context"], doc["portData"]["count"]["output"]["words"]) == ({"team": "a"}, 1)

    # A node that keeps running: the archive names it while it runs.
    held = new_run()
    HELD.clear()
    running = asyncio.create_task(
        env("hold.1").run(
            acts.execute_node, execution(held, {"id": "hold", "type": "test_held_node"})
        )
    )

    async def current() -> dict[str, Any] | None:
        found = await archive.runs.find_one({"_id": held.workflow_id})
        return found if found and found.get("current_nodes") == ["hold"] else None

    doc = await eventually(
        current, what="the held node is current", alive=lambda: not running.done()
    )
    assert doc["currentNodeId"] == "hold"
    HELD.set()
    outcome = await running
    assert outcome.output == "released"
    doc = await archive.runs.find_one({"_id": held.workflow_id})
    assert doc is not None
    assert (doc["currentNodeId"], doc["current_nodes"]) == ("hold", [])
