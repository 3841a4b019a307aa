"""One expression budget per node execution and per workflow task (issue 28, item 5).

Each evaluation alone stays under ``MAX_EVALUATION_STEPS`` here: what stops these
runs is the budget their evaluations share (``expression_node_steps`` in
activities, ``expression_workflow_task_steps`` in the workflow), never a per-item
allowance, the deadlock detector or a stalled worker. The graphs skip
registration (``parse_graph`` only), as a graph's data, not its text, makes the
cost (docs/graphs/index.md#expression-limits).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
    RunStatus,
)
from spindle.shared.graphs.expressions import (
    DEFAULT_NODE_STEPS,
    DEFAULT_WORKFLOW_TASK_STEPS,
    MAX_EVALUATION_STEPS,
    EvaluationBudget,
    evaluate,
)
from spindle.shared.graphs.structure import parse_graph
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

NODE_SETTING = "SPINDLE_EXPRESSION_NODE_STEPS"
TASK_SETTING = "SPINDLE_EXPRESSION_WORKFLOW_TASK_STEPS"

COSTLY = "length(input.big[?@ > `0`]) > `0`"
"""About five steps per element of ``input.big``: each call costs what its data says."""
BIG = list(range(1, 36_001))
"""``COSTLY`` over it: about 180,000 steps, under the per-evaluation cap."""


def steps_of(expression: str, data: Any) -> int:
    budget = EvaluationBudget(limit=10**9)
    evaluate(expression, data, budget=budget)
    return budget.steps


def graph(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Any:
    return parse_graph({"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges})


def filter_graph() -> Any:
    return graph(
        "costly-filter",
        [
            {
                "id": "keep",
                "type": "filter",
                "params": {"items": "input.items", "where": COSTLY},
            },
            {"id": "out", "type": "output"},
        ],
        [{"from": "keep", "to": "out"}],
    )


SIMPLE = graph(
    "simple",
    [
        {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "a b c"}}},
        {"id": "b", "type": "tool", "params": {"tool": "word_count", "args": {"text": "d e"}}},
        {"id": "out", "type": "output", "params": {"message": "{{ a.words }} words"}},
    ],
    [{"from": "a", "to": "b"}, {"from": "b", "to": "out"}],
)


async def start(
    runner: GraphRunner, spec: Any, run_input: Any, *, tenant: str = "default", **extra: Any
) -> WorkflowHandle[Any, GraphRunResult]:
    return await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, input=run_input, tenant_id=tenant, **extra),
        id=f"{spec.name}-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )


async def failure(handle: WorkflowHandle[Any, GraphRunResult], timeout: float = 60) -> str:
    """The run fails with ``ExpressionBudgetSpent``; its message."""
    with pytest.raises(WorkflowFailureError) as failed:
        await asyncio.wait_for(handle.result(), timeout=timeout)
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "ExpressionBudgetSpent", cause
    return cause.message


async def failed_tasks(handle: WorkflowHandle[Any, Any]) -> int:
    history = await handle.fetch_history()
    return sum(
        1 for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    )


def test_each_evaluation_here_is_under_its_own_cap() -> None:
    # What makes the runs below fail is the budget they share, not one evaluation.
    steps = steps_of(COSTLY, {"input": {"big": BIG}})
    assert MAX_EVALUATION_STEPS * 0.8 < steps < MAX_EVALUATION_STEPS


async def test_a_filter_spends_one_budget_over_all_its_items(runner: GraphRunner) -> None:
    items = DEFAULT_NODE_STEPS // 150_000 + 3  # each item alone is fine; together, not
    handle = await start(runner, filter_graph(), {"items": list(range(items)), "big": BIG})
    message = await failure(handle)
    assert "node 'keep'" in message and NODE_SETTING in message
    assert f"expression budget of {DEFAULT_NODE_STEPS}" in message
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    keep = next(r for r in described.node_reports if r.node_id == "keep")
    assert keep.status is NodeStatus.FAILED
    assert keep.attempt == 1  # not retried: the same data spends it again
    # A filter within the budget runs as before.
    within = await start(runner, filter_graph(), {"items": [1, 2], "big": BIG[:100]})
    done = await asyncio.wait_for(within.result(), timeout=60)
    assert done.status is RunStatus.COMPLETED
    assert done.output["items"] == [1, 2]


async def test_a_maps_item_templates_share_the_nodes_budget(runner: GraphRunner) -> None:
    spec = graph(
        "costly-map",
        [
            {
                "id": "each",
                "type": "map",
                "params": {
                    "over": "input.items",
                    "node": {
                        "type": "tool",
                        "params": {
                            "tool": "word_count",
                            "args": {"text": "{{ length(input.big[?@ > `0`]) }} words"},
                        },
                    },
                },
            },
            {"id": "out", "type": "output"},
        ],
        [{"from": "each", "to": "out"}],
    )
    items = DEFAULT_NODE_STEPS // 150_000 + 3
    handle = await start(runner, spec, {"items": list(range(items)), "big": BIG})
    message = await failure(handle)
    assert "node 'each'" in message and NODE_SETTING in message
    described = await runner.describe(handle)
    reports = {r.node_id: r.status for r in described.node_reports}
    assert reports.get("each") is NodeStatus.FAILED, reports


async def test_twenty_costly_edge_conditions_fail_the_run_not_the_workflow_task(
    runner: GraphRunner,
) -> None:
    # Twenty conditions of ~180,000 steps each: ~3.6 M steps in one workflow task,
    # far past the deadlock detector's 2 s if they all ran; the task's budget stops them.
    targets = [f"t{i}" for i in range(20)]
    spec = graph(
        "costly-edges",
        [
            {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "x"}}},
            *({"id": t, "type": "output"} for t in targets),
        ],
        [{"from": "a", "to": t, "when": COSTLY} for t in targets],
    )
    started = time.monotonic()
    handle = await start(runner, spec, {"big": BIG})
    message = await failure(handle, timeout=30)
    elapsed = time.monotonic() - started
    assert "edge condition after node 'a'" in message
    assert "the workflow task" in message and TASK_SETTING in message
    assert f"expression budget of {DEFAULT_WORKFLOW_TASK_STEPS}" in message
    assert await failed_tasks(handle) == 0  # no workflow-task retry loop
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    # Promptly: less than one workflow-task retry (10 s) would take.
    assert elapsed < 10, elapsed


async def test_the_workflow_task_budget_comes_from_the_run_input(runner: GraphRunner) -> None:
    # Two conditions of ~75,000 steps: within the default budget, not within 100,000.
    spec = graph(
        "two-edges",
        [
            {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "x"}}},
            {"id": "b", "type": "output"},
            {"id": "c", "type": "output"},
        ],
        [{"from": "a", "to": "b", "when": COSTLY}, {"from": "a", "to": "c", "when": COSTLY}],
    )
    data = {"big": BIG[:15_000]}
    assert 2 * steps_of(COSTLY, {"input": data}) < DEFAULT_WORKFLOW_TASK_STEPS
    fits = await start(runner, spec, data)
    assert (await asyncio.wait_for(fits.result(), timeout=60)).status is RunStatus.COMPLETED
    tight = await start(runner, spec, data, expression_workflow_task_steps=100_000)
    message = await failure(tight)
    assert "expression budget of 100000" in message and TASK_SETTING in message
    assert await failed_tasks(tight) == 0


async def timed(runner: GraphRunner, tenant: str) -> float:
    started = time.monotonic()
    handle = await start(runner, SIMPLE, None, tenant=tenant)
    result = await asyncio.wait_for(handle.result(), timeout=120)
    assert result.status is RunStatus.COMPLETED
    return time.monotonic() - started


async def test_another_tenants_run_is_not_slowed_by_a_bomb(runner: GraphRunner) -> None:
    await timed(runner, "tenant-b")  # warm: first runs import and cache
    alone = statistics.median([await timed(runner, "tenant-b") for _ in range(3)])
    # 60 items of ~180,000 steps: on the event loop, the worker would be held for
    # 60 evaluations (12 s or more); its budget stops it after 1 M steps, in a thread.
    bomb = await start(
        runner, filter_graph(), {"items": list(range(60)), "big": BIG}, tenant="tenant-a"
    )
    during = await timed(runner, "tenant-b")
    # Measured while the bomb ran: it was still running when the other run ended.
    running = (await bomb.describe()).status == WorkflowExecutionStatus.RUNNING
    message = await failure(bomb)
    assert "node 'keep'" in message and NODE_SETTING in message
    assert running
    # Generous: the bomb shares the interpreter with it, but never holds the loop.
    assert during < alone * 8, (during, alone)
