"""Long runs continue as new at node boundaries (docs/graphs/index.md, long runs).

A loop runs while a prompt waits on a parallel branch; with a small event threshold
the run continues as new several times. What a user sees must not change: the
prompt is asked once and answered in a later generation, the loop stops at its
bound (the counter crossed generations), the stream has one history WARNING, and
the same workflow id answers describe, updates and the result.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.service import RPCError

from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner, M, eventually, types_of

pytestmark = pytest.mark.workflow

LOOPS = 20

LOOP_AND_PROMPT = parse_graph(
    {
        "name": "loop-and-prompt",
        "entry": "start",
        "nodes": [
            {
                "id": "start",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            {"id": "ask", "type": "prompt", "params": {"prompt": "Ship {{ input.topic }}?"}},
            {
                "id": "work",
                "type": "tool",
                "max_visits": LOOPS + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }} again"}},
            },
            {
                "id": "check",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "b"}},
            },
            {
                "id": "done",
                "type": "output",
                "params": {"select": "{answer: ask, words: work, meta: meta}"},
            },
        ],
        "edges": [
            {"from": "start", "to": "ask"},
            {"from": "start", "to": "work"},
            {"from": "work", "to": "check"},
            {"from": "check", "to": "work", "max_iterations": LOOPS},
            {"from": "check", "to": "done"},
            {"from": "ask", "to": "done"},
        ],
    }
)
validate_structure(LOOP_AND_PROMPT)


async def test_a_loop_and_a_waiting_prompt_carry_on_across_generations(
    runner: GraphRunner,
) -> None:
    workflow_id = f"can-{uuid.uuid4().hex[:10]}"
    await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=LOOP_AND_PROMPT,
            input={"topic": "spindle"},
            continue_as_new_after_events=100,
            history_warning_events=100,
        ),
        id=workflow_id,
        task_queue=runner.task_queue,
    )
    # By id, not by the first run: later generations have their own run ids.
    latest = runner.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)

    async def loop_done_prompt_waiting() -> RunDescription | None:
        try:
            described = await latest.query(
                DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            return None  # asked the run that was just continuing as new: ask again
        looped = described.report_counts.get("SUCCESS", 0) == 1 + 2 * (LOOPS + 1)
        return described if looped and described.current_nodes == ["ask"] else None

    # ``done`` joins the loop and the prompt: it waits for the answer.
    waiting = await eventually(loop_done_prompt_waiting, what="the loop over, the prompt waiting")
    assert waiting.generation >= 3
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


WORKSTREAM_THEN_LOOP = parse_graph(
    {
        "name": "workstream-then-loop",
        "entry": "launch",
        "nodes": [
            {
                "id": "launch",
                "type": "workstream",
                "params": {"task": "watch {{ input.topic }}", "interactive": True},
            },
            {
                "id": "work",
                "type": "tool",
                "max_visits": LOOPS + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }}"}},
            },
            {"id": "done", "type": "output"},
        ],
        "edges": [
            {"from": "launch", "to": "work"},
            {"from": "work", "to": "work", "max_iterations": LOOPS},
            {"from": "work", "to": "done"},
        ],
    }
)
validate_structure(WORKSTREAM_THEN_LOOP)


async def test_a_running_workstream_holds_the_run_in_its_generation(runner: GraphRunner) -> None:
    """Children are not carried over: while one runs, the run stays and warns instead."""
    workflow_id = f"can-ws-{uuid.uuid4().hex[:10]}"
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=WORKSTREAM_THEN_LOOP,
            input={"topic": "spindle"},
            continue_as_new_after_events=100,
            history_warning_events=100,
        ),
        id=workflow_id,
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    result = await handle.result()

    assert result.generation == 1
    assert result.report_counts == {"SUCCESS": 1 + (LOOPS + 1) + 1}
    messages = await runner.messages(workflow_id)
    warnings = [m["m"] for m in messages if m["t"] == M.WARNING]
    assert sum("history is large" in w for w in warnings) == 1
