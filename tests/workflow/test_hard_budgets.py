"""Hard budgets (docs/graphs/budgets.md, "At a cap") on the time-skipping server.

Tool calls are counted before they start: of a turn's batch at most what is left
runs, the rest wait for a raise (``pause``) or none runs (``fail``); a map's items
are admitted as they are dispatched and the map pauses mid-way at the cap,
going on where it stopped after a raise; and while a run is paused nothing
starts, however long it waits. Temporal's history says what ran: one
``tool_call`` activity per agent tool call, one ``run_item_batch`` per part of a
page of items, one ``llm_turn`` per turn.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import orjson
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.contracts.budgets import (
    RAISE_BUDGET_UPDATE,
    BudgetAck,
    BudgetLimit,
    BudgetRaise,
    RunBudget,
)
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    RunStatus,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.worker.contracts import LLM_TURN, RUN_ITEM_BATCH, TOOL_CALL
from tests.workflow.runs import GraphRunner, M, eventually

pytestmark = pytest.mark.workflow

# The offline model asks for both tools in its first turn (a query and an expression).
TWO_TOOLS = parse_graph(
    {
        "name": "two-tools",
        "entry": "solver",
        "nodes": [
            {
                "id": "solver",
                "type": "agent",
                "params": {
                    "tools": ["word_count", "calculator"],
                    "max_turns": 3,
                    "prompt": "what is 2 + 2?",
                },
            }
        ],
        "edges": [],
    }
)


def map_graph(name: str, *, with_prompt: bool = False) -> dict[str, Any]:
    """A map of calculator items; optionally beside it a prompt, then an agent."""
    nodes: list[dict[str, Any]] = [
        {
            "id": "numbers",
            "type": "map",
            "params": {
                "over": "input",
                "concurrency": 10,
                "node": {
                    "type": "tool",
                    "params": {"tool": "calculator", "args": {"expression": "{{ item }} * 2"}},
                },
            },
        }
    ]
    edges: list[dict[str, Any]] = []
    if with_prompt:
        nodes = [
            {
                "id": "split",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            *nodes,
            {"id": "hold", "type": "prompt", "params": {"prompt": "Go on?"}},
            {
                "id": "solver",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": 3, "prompt": "what is 2 + 2?"},
            },
        ]
        edges = [
            {"from": "split", "to": "numbers"},
            {"from": "split", "to": "hold"},
            {"from": "hold", "to": "solver"},
        ]
    return {"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges}


async def _start(runner: GraphRunner, run_input: GraphRunInput) -> WorkflowHandle[Any, Any]:
    return await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=f"{run_input.graph.name}-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )


async def _paused(runner: GraphRunner, handle: WorkflowHandle[Any, Any]) -> RunDescription:
    async def probe() -> RunDescription | None:
        described = await runner.describe(handle)
        budget = described.budget
        held = budget is not None and budget.paused and described.status is RunStatus.PAUSED
        return described if held else None

    return await eventually(probe, what="the run paused at its budget")


async def _scheduled(handle: WorkflowHandle[Any, Any], activity: str) -> list[Any]:
    """The inputs (decoded JSON) of every ``activity`` the run scheduled, in order."""
    history = await handle.fetch_history()
    found = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name == activity:
            found.append(orjson.loads(attributes.input.payloads[0].data))
    return found


async def _raise(handle: WorkflowHandle[Any, Any], **caps: Any) -> BudgetAck:
    ack: BudgetAck = await handle.execute_update(
        RAISE_BUDGET_UPDATE, BudgetRaise(**caps), result_type=BudgetAck
    )
    return ack


async def test_two_tools_with_one_left_runs_one_and_pauses_until_a_raise_runs_the_other(
    runner: GraphRunner,
) -> None:
    handle = await _start(
        runner, GraphRunInput(graph=TWO_TOOLS, budget=RunBudget(max_tool_calls=1))
    )
    paused = await _paused(runner, handle)
    assert paused.budget is not None
    assert paused.budget.exhausted is BudgetLimit.MAX_TOOL_CALLS
    assert paused.budget.usage.tool_calls == 1
    calls = await _scheduled(handle, TOOL_CALL)
    assert [c["call"]["name"] for c in calls] == ["word_count"], "one call ran, one waits"
    warning = [m for m in await runner.messages(handle.id) if m["t"] == M.WARNING][-1]
    assert "max_tool_calls reached (1 of 1)" in warning["m"]

    ack = await _raise(handle, max_tool_calls=2)
    assert ack.resumed
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.budget is not None
    assert result.budget.usage.tool_calls == 2
    calls = await _scheduled(handle, TOOL_CALL)
    assert sorted(c["call"]["name"] for c in calls) == ["calculator", "word_count"]
    assert len(await _scheduled(handle, LLM_TURN)) == 2


async def test_on_exhausted_fail_fails_before_any_call_of_the_batch_runs(
    runner: GraphRunner,
) -> None:
    budget = RunBudget(max_tool_calls=1, on_exhausted="fail")
    handle = await _start(runner, GraphRunInput(graph=TWO_TOOLS, budget=budget))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert "budget exhausted: max_tool_calls" in cause.message
    assert "on_exhausted: fail" in cause.message
    assert await _scheduled(handle, TOOL_CALL) == [], "no call of the batch ran"
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    assert described.budget is not None and described.budget.usage.tool_calls == 0


async def test_a_200_item_map_pauses_at_50_and_finishes_after_a_raise_each_item_once(
    runner: GraphRunner,
) -> None:
    spec = parse_graph(map_graph("budget-map-200"))
    run_input = GraphRunInput(
        graph=spec, input=list(range(200)), budget=RunBudget(max_tool_calls=50)
    )
    handle = await _start(runner, run_input)
    paused = await _paused(runner, handle)
    assert paused.budget is not None
    assert paused.budget.usage.tool_calls == 50
    assert paused.budget.exhausted is BudgetLimit.MAX_TOOL_CALLS
    assert paused.current_nodes == ["numbers"]
    parts = await _scheduled(handle, RUN_ITEM_BATCH)
    assert [(p["first"], p["count"]) for p in parts] == [(0, 50)]

    await _raise(handle, max_tool_calls=500)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.budget is not None
    assert result.budget.usage.tool_calls == 200
    items = result.output["items"]
    assert [item["id"] for item in items] == [str(i) for i in range(200)], "each item once"
    assert [item["data"] for item in items] == [i * 2 for i in range(200)]
    parts = await _scheduled(handle, RUN_ITEM_BATCH)
    assert [(p["first"], p["count"]) for p in parts] == [(0, 50), (50, 150)]


async def test_a_map_at_its_cap_with_on_exhausted_fail_fails_naming_the_cap(
    runner: GraphRunner,
) -> None:
    spec = parse_graph(map_graph("budget-map-fail"))
    budget = RunBudget(max_tool_calls=5, on_exhausted="fail")
    handle = await _start(runner, GraphRunInput(graph=spec, input=list(range(8)), budget=budget))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert "budget exhausted: max_tool_calls reached (5 of 5)" in cause.message
    parts = await _scheduled(handle, RUN_ITEM_BATCH)
    assert sum(p["count"] or 8 for p in parts) == 5, "items past the cap never ran"


async def test_a_paused_run_starts_nothing_for_days(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    spec = parse_graph(map_graph("budget-held", with_prompt=True))
    run_input = GraphRunInput(
        graph=spec, input=list(range(20)), budget=RunBudget(max_tool_calls=10)
    )
    handle = await _start(runner, run_input)
    await runner.wait_for_prompt(handle, "hold")
    await _paused(runner, handle)
    # The prompt is answered while the map waits at the tool-call cap: the agent after
    # it must not start its LLM turn (its own caps are not reached, the run's is).
    await runner.answer(handle, UserInput(message="yes"))
    await time_skipping_env.sleep(timedelta(days=3))
    described = await runner.describe(handle)
    assert described.status is RunStatus.PAUSED
    assert await _scheduled(handle, LLM_TURN) == []
    assert await _scheduled(handle, TOOL_CALL) == []
    parts = await _scheduled(handle, RUN_ITEM_BATCH)
    assert [(p["first"], p["count"]) for p in parts] == [(0, 9)], "the split took one"

    await _raise(handle, max_tool_calls=100)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert len(await _scheduled(handle, LLM_TURN)) == 2
    assert result.budget is not None and result.budget.usage.tool_calls == 22
