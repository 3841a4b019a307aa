"""Long runs continue as new at node boundaries (docs/graphs/index.md, long runs).

A loop runs while a prompt waits on a parallel branch; with a small event threshold
the run continues as new several times. What a user sees must not change: the
prompt is asked once and answered in a later generation, the loop stops at its
bound (the counter crossed generations), the stream has one history WARNING, and
the same workflow id answers describe, updates and the result.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, TypeVar

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    CHILD_STATE_QUERY,
    MESSAGE_WORKSTREAM_UPDATE,
    TERMINATE_WORKSTREAM_UPDATE,
    WORKSTREAMS_QUERY,
    ChildState,
    MessageWorkstream,
    TerminateAck,
    TerminateWorkstream,
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
    WorkstreamState,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from tests.workflow.loop_and_prompt import LOOPS, loop_over_prompt_waiting
from tests.workflow.runs import GraphRunner, M, eventually, types_of

pytestmark = pytest.mark.workflow

T = TypeVar("T")


async def test_a_loop_and_a_waiting_prompt_carry_on_across_generations(
    runner: GraphRunner,
) -> None:
    workflow_id = f"can-{uuid.uuid4().hex[:10]}"
    latest, waiting = await loop_over_prompt_waiting(runner, workflow_id)
    assert waiting.pending_input is not None
    assert waiting.pending_input.prompt == "Ship spindle?"

    await runner.answer(latest, UserInput(message="yes"))
    result = await latest.result()

    assert result.output["answer"] == {"ask_response": "yes"}
    assert result.output["words"] == {"words": 2, "characters": 13, "sentences": 1}
    # Loop counters crossed the boundaries: the bound held, no visit was lost or redone.
    assert result.report_counts == {"SUCCESS": 1 + 1 + 2 * (LOOPS + 1) + 1}
    assert result.generation >= waiting.generation
    assert result.output["meta"]["tools_used_count"] == 1 + 2 * (LOOPS + 1)
    assert len(result.output["meta"]["tools_used"]) == 20
    visits = [(r.node_id, r.visit) for r in result.node_reports if r.node_id == "work"]
    assert visits[-1] == ("work", LOOPS + 1)

    messages = await runner.messages(workflow_id)
    kinds = types_of(messages)
    assert kinds.count(M.REQUEST_INPUT) == 1  # asked once, answered generations later
    warnings = [m["m"] for m in messages if m["t"] == M.WARNING]
    assert sum("reached max_iterations" in w for w in warnings) == 1
    assert sum("history is large" in w for w in warnings) == 1  # once per run, not per run id
    assert kinds[-1] == M.COMPLETE
    assert kinds.count(M.COMPLETE) == 1
    # Every node's messages came once: the stream's sequence ran on across generations.
    updates: list[Any] = [
        m for m in messages if m["t"] == M.UPDATE and m["d"].get("node_id") == "work"
    ]
    assert len(updates) == 2 * (LOOPS + 1)


# -- running workstreams cross the boundary ---------------------------------------------

WS_LOOPS = 2 * LOOPS

WORKSTREAM_PROMPT_AND_LOOP = parse_graph(
    {
        "name": "workstream-prompt-and-loop",
        "entry": "launch",
        "nodes": [
            {
                "id": "launch",
                "type": "workstream",
                "params": {"task": "watch {{ input.topic }}", "interactive": True},
            },
            {"id": "ask", "type": "prompt", "params": {"prompt": "Ship {{ input.topic }}?"}},
            {
                "id": "work",
                "type": "tool",
                "max_visits": WS_LOOPS + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }}"}},
            },
            {"id": "done", "type": "output", "params": {"select": "{answer: ask, words: work}"}},
        ],
        "edges": [
            {"from": "launch", "to": "ask"},
            {"from": "launch", "to": "work"},
            {"from": "work", "to": "work", "max_iterations": WS_LOOPS},
            {"from": "work", "to": "done"},
            {"from": "ask", "to": "done"},
        ],
    }
)
validate_structure(WORKSTREAM_PROMPT_AND_LOOP)


async def _query_latest(
    handle: WorkflowHandle[Any, Any], name: str, result_type: type[T]
) -> T | None:
    try:
        return await handle.query(name, result_type=result_type, rpc_timeout=timedelta(seconds=2))
    except RPCError:
        return None  # asked the generation that was just continuing as new: ask again


async def test_a_running_workstream_a_waiting_prompt_and_a_loop_cross_generations(
    runner: GraphRunner,
) -> None:
    """The issue's test: a HITL wait, a running interactive workstream and loop counters
    cross continue-as-new; the workstream, messaged and ended generations after its
    launch, reports its end to the latest generation."""
    workflow_id = f"can-ws-{uuid.uuid4().hex[:10]}"
    latest, waiting = await loop_over_prompt_waiting(
        runner,
        workflow_id,
        graph=WORKSTREAM_PROMPT_AND_LOOP,
        successes=1 + (WS_LOOPS + 1),
    )
    assert waiting.generation >= 3  # the child ran all along: it did not hold the run

    # The loop's last node may still be followed by one more continue-as-new, and a
    # query that meets it fails: ask again until a generation answers.
    listed = await eventually(
        lambda: _query_latest(latest, WORKSTREAMS_QUERY, WorkstreamList),
        what="the workstream list of the latest generation",
    )
    [child] = listed.workstreams
    assert (child.launch_id, child.state) == ("ws-1", WorkstreamState.RUNNING)
    child_handle = runner.client.get_workflow_handle(child.child_workflow_id)
    child_run = await child_handle.describe()
    assert child_run.status == WorkflowExecutionStatus.RUNNING

    # Steering by an adopted child's workflow id: a follow-up message, then terminate.
    ack = await latest.execute_update(
        MESSAGE_WORKSTREAM_UPDATE,
        MessageWorkstream(launch_id="ws-1", message=WorkstreamMessageRequest(message="status?")),
        result_type=WorkstreamMessageAck,
    )
    assert ack.message_id == "m-1"  # ids went on counting across generations

    async def answered() -> ChildState | None:
        state = await child_handle.query(CHILD_STATE_QUERY, result_type=ChildState)
        return (
            state if state.waiting_for_message and "status?" in (state.last_answer or "") else None
        )

    await eventually(answered, what="the child's answer to the follow-up")
    stopping = await latest.execute_update(
        TERMINATE_WORKSTREAM_UPDATE, TerminateWorkstream(launch_id="ws-1"), result_type=TerminateAck
    )
    assert stopping.state in (WorkstreamState.CANCELING, WorkstreamState.CANCELED)

    async def ended() -> WorkstreamInfo | None:
        found = await _query_latest(latest, WORKSTREAMS_QUERY, WorkstreamList)
        if found is None or found.workstreams[0].state is not WorkstreamState.CANCELED:
            return None
        return found.workstreams[0]

    settled = await eventually(ended, what="ws-1 ended, as the latest generation sees it")
    assert settled.summary  # the child's last answer reached the latest generation
    assert "status?" in settled.summary

    await runner.answer(latest, UserInput(message="yes"))
    result = await latest.result()
    assert result.output["answer"] == {"ask_response": "yes"}
    assert result.report_counts == {"SUCCESS": 1 + (WS_LOOPS + 1) + 1 + 1}
    visits = [(r.node_id, r.visit) for r in result.node_reports if r.node_id == "work"]
    assert visits[-1] == ("work", WS_LOOPS + 1)
    assert result.generation >= waiting.generation

    messages = await runner.messages(workflow_id)
    kinds = types_of(messages)
    assert kinds.count(M.REQUEST_INPUT) == 1
    ends = [m["m"] for m in messages if m["t"] == M.SYSTEM and "Workstream ws-1" in m["m"]]
    assert len(ends) == 1 and "terminated" in ends[0]
    main = types_of([m for m in messages if m.get("w") in (None, "main")])
    assert main[-1] == M.COMPLETE and main.count(M.COMPLETE) == 1
    assert (await child_handle.describe()).status == WorkflowExecutionStatus.COMPLETED


CHILDREN = 4

CHILDREN_THEN_LONG_LOOP = parse_graph(
    {
        "name": "children-then-long-loop",
        "entry": "start",
        "nodes": [
            {
                "id": "start",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            *[
                {
                    "id": f"launch{n}",
                    "type": "workstream",
                    "params": {"task": f"count the words of part {n} of {{{{ input.topic }}}}"},
                }
                for n in range(1, CHILDREN + 1)
            ],
            {
                "id": "work",
                "type": "tool",
                "max_visits": 4 * LOOPS + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }}"}},
            },
            {"id": "done", "type": "output"},
        ],
        "edges": [
            *[{"from": "start", "to": f"launch{n}"} for n in range(1, CHILDREN + 1)],
            *[{"from": f"launch{n}", "to": "work"} for n in range(1, CHILDREN + 1)],
            {"from": "work", "to": "work", "max_iterations": 4 * LOOPS},
            {"from": "work", "to": "done"},
        ],
    }
)
validate_structure(CHILDREN_THEN_LONG_LOOP)


@pytest.fixture
async def paced_runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[GraphRunner]:
    """A worker whose offline model streams slowly: its children's turns take a
    while (in real time), the parent's tool nodes do not."""
    task_queue = f"wf-paced-{uuid.uuid4().hex[:8]}"
    settings = worker_settings.model_copy(update={"offline_token_delay_ms": 100.0})
    worker = build_worker(
        time_skipping_env.client, settings, bus=run_bus, archive=run_archive, task_queue=task_queue
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive)


async def test_children_ending_while_the_run_hands_over_are_not_lost(
    paced_runner: GraphRunner,
) -> None:
    """Children end on their own while the parent continues as new every few nodes:
    each end reaches whichever generation is current, none is lost or told twice."""
    runner = paced_runner
    workflow_id = f"can-wse-{uuid.uuid4().hex[:10]}"
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=CHILDREN_THEN_LONG_LOOP,
            input={"topic": "spindle"},
            continue_as_new_after_events=100,
            history_warning_events=100,
        ),
        id=workflow_id,
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    first = await handle.describe()
    result = await runner.client.get_workflow_handle(
        workflow_id, result_type=GraphRunResult
    ).result()
    assert result.generation >= 5

    listed = await runner.client.get_workflow_handle(workflow_id).query(
        WORKSTREAMS_QUERY, result_type=WorkstreamList
    )
    assert [(i.launch_id, i.state) for i in listed.workstreams] == [
        (f"ws-{n}", WorkstreamState.COMPLETED) for n in range(1, CHILDREN + 1)
    ]
    assert all(i.summary for i in listed.workstreams)
    messages = await runner.messages(workflow_id)
    for n in range(1, CHILDREN + 1):
        ends = [m for m in messages if m["t"] == M.SYSTEM and f"Workstream ws-{n} " in m["m"]]
        assert len(ends) == 1, ends
        assert "completed" in ends[0]["m"]
    # Some child outlived the generation that launched it (else this tested nothing).
    generation_1 = runner.client.get_workflow_handle(workflow_id, run_id=first.run_id)
    first_closed = (await generation_1.describe()).close_time
    assert first_closed is not None
    child_closes = [
        (await runner.client.get_workflow_handle(f"{workflow_id}.ws-{n}").describe()).close_time
        for n in range(1, CHILDREN + 1)
    ]
    assert any(c is not None and c > first_closed for c in child_closes)
