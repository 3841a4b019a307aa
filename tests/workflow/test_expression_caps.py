"""Costly expressions fail their node or run with a clear error, in the workflow and
in activities alike, while other runs go on (spindle.shared.graphs.expressions).

The graphs here skip registration (which refuses the worst of them) so the caps
that evaluation itself enforces are exercised through the real worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.runs import NodeStatus, RunStatus
from spindle.shared.graphs.structure import parse_graph
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

BIG_INPUT = "x" * 100_000
"""2**9 copies of it (what a 9-pipe bomb builds, within the static limit) are 51 MB."""


def bomb(pipes: int) -> str:
    return "input" + " | [@,@]" * pipes


def graph(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Any:
    # parse only: validate_structure would refuse the registration-time bombs.
    return parse_graph({"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges})


def condition_graph(expression: str) -> Any:
    return graph(
        "bomb-when",
        [
            {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "hi"}}},
            {"id": "b", "type": "output"},
        ],
        [{"from": "a", "to": "b", "when": expression}],
    )


def message_graph(template: str) -> Any:
    return graph(
        "bomb-message",
        [
            {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "hi"}}},
            {"id": "out", "type": "output", "params": {"message": template}},
        ],
        [{"from": "a", "to": "out"}],
    )


NORMAL = graph(
    "normal",
    [
        {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "a b c"}}},
        {"id": "out", "type": "output", "params": {"message": "{{ a.words }} words"}},
    ],
    [{"from": "a", "to": "out", "when": "a.words > `0`"}],
)


async def failure_of(runner: GraphRunner, spec: Any, run_input: Any) -> tuple[str, Any]:
    """Start ``spec`` next to a normal run; the normal run completes; the cause's message."""
    handle = await runner.start(spec, run_input)
    normal = await runner.start(NORMAL, None)
    with pytest.raises(WorkflowFailureError) as failure:
        await asyncio.wait_for(handle.result(), timeout=60)
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "NodeFailed"
    done = await asyncio.wait_for(normal.result(), timeout=60)
    assert done.status is RunStatus.COMPLETED
    assert done.output["words"] == 3
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    return cause.message, described


@pytest.mark.parametrize(
    ("expression", "run_input", "says"),
    [
        (bomb(23), "x", "expression too costly"),
        (bomb(30), "x", "expression too costly"),
        (bomb(9), BIG_INPUT, "builds a value larger than"),
    ],
)
async def test_a_costly_edge_condition_fails_the_run_not_the_workflow_task(
    runner: GraphRunner, expression: str, run_input: Any, says: str
) -> None:
    message, described = await failure_of(runner, condition_graph(expression), run_input)
    assert "edge condition after node 'a'" in message
    assert says in message
    reports = {r.node_id: r.status for r in described.node_reports}
    assert reports == {"a": NodeStatus.SUCCESS}


@pytest.mark.parametrize(
    ("expression", "run_input", "says"),
    [
        (bomb(23), "x", "expression too costly"),
        (bomb(30), "x", "expression too costly"),
        (bomb(9), BIG_INPUT, "builds a value larger than"),
    ],
)
async def test_a_costly_message_template_fails_its_node(
    runner: GraphRunner, expression: str, run_input: Any, says: str
) -> None:
    message, described = await failure_of(
        runner, message_graph(f"Result: {{{{ {expression} }}}}"), run_input
    )
    assert "node 'out'" in message
    assert says in message
    reports = {r.node_id: r for r in described.node_reports}
    assert reports["out"].status is NodeStatus.FAILED
    assert reports["out"].attempt == 1  # no retry can fix it
