"""A bound the graph states is the bound, in a real run (issue 28, item 1).

A loop whose back edge allows 1,500 iterations runs each of its two nodes 1,501
times (3,002 node executions; the hidden cap of 1,000 visits is gone), continuing
as new on the way; with the ``max_node_visits`` setting below what the loop needs,
the run fails with ``NodeVisitsExceeded`` naming the setting, never ``completed``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.errors import NodeVisitsExceeded
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner

# A size test: 3,002 node executions (local activities) on the time-skipping server.
pytestmark = [pytest.mark.workflow, pytest.mark.timeout(300)]

ITERATIONS = 1500  # 2 x (1 + 1500) = 3,002 node executions


def loop(iterations: int) -> Any:
    """Two local nodes in a loop bounded only by its back edge (no max_visits)."""
    spec = parse_graph(
        {
            "name": "edge-bounded-loop",
            "entry": "a",
            "nodes": [
                {"id": "a", "type": "output", "params": {"select": "input"}},
                {"id": "b", "type": "output", "params": {"select": "input"}},
            ],
            "edges": [
                {"from": "a", "to": "b"},
                {"from": "b", "to": "a", "max_iterations": iterations},
            ],
        }
    )
    validate_structure(spec)
    return spec


async def start(runner: GraphRunner, run_input: GraphRunInput) -> Any:
    return await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=f"visits-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )


async def test_a_loop_bounded_by_its_edge_runs_as_often_as_the_edge_allows(
    runner: GraphRunner,
) -> None:
    started = time.monotonic()
    handle = await start(
        runner,
        GraphRunInput(
            graph=loop(ITERATIONS),
            input={"text": "x"},
            # Local activities complete in workflow tasks that heartbeat every few
            # seconds; the history length a task sees grows in those steps, so the
            # threshold is low enough for any pace of the machine.
            continue_as_new_after_events=500,
            max_node_visits=100_000,
        ),
    )
    result = await handle.result()
    print(f"\n3,002 node executions in {time.monotonic() - started:.1f}s")
    assert result.status is RunStatus.COMPLETED
    assert result.report_counts == {NodeStatus.SUCCESS.value: 2 * (1 + ITERATIONS)}
    assert result.generation > 1  # the run continued as new on its way


async def test_a_run_stopped_by_the_max_node_visits_setting_fails_naming_it(
    runner: GraphRunner,
) -> None:
    handle = await start(
        runner, GraphRunInput(graph=loop(ITERATIONS), input={"text": "x"}, max_node_visits=5)
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    cause = caught.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == NodeVisitsExceeded.__name__
    assert "max_node_visits setting" in cause.message and "node 'a'" in cause.message
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    assert described.report_counts == {NodeStatus.SUCCESS.value: 10}
