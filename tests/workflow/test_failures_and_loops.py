"""Failures, retries, loops and parallel branches of ``GraphRun`` with real activities.

Custom node types registered here (through the worker's registry, like any plug-in)
fail on purpose; everything else is the real worker.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import ApplicationError

from spindle.nodes import NodeContext, NodeResult, StateReads, node_type
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import NodeStatus, RunStatus
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner, M, types_of

pytestmark = pytest.mark.workflow

FAST_RETRY = {"max_attempts": 3, "initial_interval_seconds": 0.1, "max_interval_seconds": 0.2}


@node_type("test_flaky_once", description="Posts an UPDATE, then fails on its first attempt.")
async def flaky_once(ctx: NodeContext) -> NodeResult:
    await ctx.poster.post(AgentMessageType.UPDATE, f"{ctx.node.id} working")
    if activity.info().attempt == 1:
        raise RuntimeError("transient glitch")
    return NodeResult(data={"attempt": activity.info().attempt})


@node_type("test_always_broken", description="Fails on every attempt.")
async def always_broken(ctx: NodeContext) -> NodeResult:
    raise RuntimeError(f"disk on fire (attempt {activity.info().attempt})")


# Reads its own earlier output from ctx.state, a key no expression names: it says so.
@node_type("test_count", description="Outputs its visit number.", reads_state=StateReads.ALL)
async def count(ctx: NodeContext) -> NodeResult:
    return NodeResult(data={"visit": ctx.visit, "seen": ctx.state.get(ctx.node.id)})


def graph(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> GraphSpec:
    spec = parse_graph({"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges})
    validate_structure(spec)
    return spec


async def test_retried_node_announces_restarting_without_duplicate_messages(
    runner: GraphRunner,
) -> None:
    spec = graph(
        "flaky",
        [
            {"id": "flaky", "type": "test_flaky_once", "retry": FAST_RETRY},
            {"id": "out", "type": "output"},
        ],
        [{"from": "flaky", "to": "out"}],
    )
    handle = await runner.start(spec)
    result = await handle.result()

    assert result.output == {"attempt": 2}
    flaky_report = next(r for r in result.node_reports if r.node_id == "flaky")
    assert flaky_report.status is NodeStatus.SUCCESS
    assert flaky_report.attempt == 2

    messages = await runner.messages(handle.id)
    flaky_messages = [m for m in messages if m.get("i") == "flaky.1"]
    # The first attempt's UPDATE is not posted again by the second attempt.
    assert [m["t"] for m in flaky_messages].count(M.UPDATE) == 1
    assert [m["t"] for m in flaky_messages] == [M.UPDATE, M.RESTARTING]
    assert "attempt 2" in flaky_messages[1]["m"]
    assert types_of(messages)[-1] == M.COMPLETE


async def test_failing_node_fails_the_run_with_a_report_and_error_messages(
    runner: GraphRunner,
) -> None:
    spec = graph(
        "broken",
        [
            {"id": "first", "type": "test_count"},
            {
                "id": "boom",
                "type": "test_always_broken",
                "retry": {**FAST_RETRY, "max_attempts": 2},
            },
            {"id": "never", "type": "output"},
        ],
        [{"from": "first", "to": "boom"}, {"from": "boom", "to": "never"}],
    )
    handle = await runner.start(spec)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "NodeFailed"
    assert "node 'boom'" in cause.message
    assert "disk on fire (attempt 2)" in cause.message
    assert (await handle.describe()).status is WorkflowExecutionStatus.FAILED

    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    assert described.error == cause.message
    reports = {r.node_id: r for r in described.node_reports}
    assert reports["first"].status is NodeStatus.SUCCESS
    assert reports["boom"].status is NodeStatus.FAILED
    assert reports["boom"].attempt == 2
    assert "disk on fire" in (reports["boom"].error or "")
    assert "never" not in reports

    messages = await runner.messages(handle.id)
    assert types_of(messages)[-2:] == [M.ERROR, M.COMPLETE]
    assert "node 'boom'" in messages[-2]["m"]
    assert messages[-1]["d"] == {"status": "failed"}
    # Each failed attempt after the first announced itself once.
    assert types_of(messages).count(M.RESTARTING) == 1


async def test_agent_without_final_answer_fails_at_max_turns(runner: GraphRunner) -> None:
    spec = graph(
        "impatient-agent",
        [
            {
                "id": "agent",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": 1, "prompt": "what is 2 + 2?"},
            }
        ],
        [],
    )
    handle = await runner.start(spec)
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, ApplicationError)
    assert "no final answer within max_turns (1)" in failure.value.cause.message
    messages = await runner.messages(handle.id)
    assert types_of(messages)[-2:] == [M.ERROR, M.COMPLETE]


async def test_loop_repeats_until_its_bound_then_warns_and_moves_on(runner: GraphRunner) -> None:
    spec = graph(
        "loop",
        [
            {"id": "work", "type": "test_count"},
            # A short pure node may run as a local activity: same ids, same messages.
            {"id": "check", "type": "test_count", "local": True},
            {"id": "done", "type": "output", "params": {"select": "{work: work, check: check}"}},
        ],
        [
            {"from": "work", "to": "check"},
            {"from": "check", "to": "work", "when": "check.visit < `10`", "max_iterations": 2},
            {"from": "check", "to": "done"},
        ],
    )
    handle = await runner.start(spec)
    result = await handle.result()

    # First pass plus two iterations, then the loop-back is refused.
    assert result.output["work"]["visit"] == 3
    assert result.output["check"]["visit"] == 3
    assert result.output["work"]["seen"] == {"visit": 2, "seen": {"visit": 1, "seen": None}}
    visits = [(r.node_id, r.visit) for r in result.node_reports]
    assert visits == [
        ("work", 1),
        ("check", 1),
        ("work", 2),
        ("check", 2),
        ("work", 3),
        ("check", 3),
        ("done", 1),
    ]

    messages = await runner.messages(handle.id)
    warnings = [m for m in messages if m["t"] == M.WARNING]
    assert len(warnings) == 1
    assert "max_iterations (2)" in warnings[0]["m"]
    assert types_of(messages)[-1] == M.COMPLETE


async def test_parallel_branches_join_once(runner: GraphRunner) -> None:
    spec = graph(
        "fan-out",
        [
            {"id": "start", "type": "test_count"},
            {
                "id": "words",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a b c"}},
            },
            {
                "id": "keys",
                "type": "tool",
                "params": {"tool": "extract_keywords", "args": {"text": "alpha beta alpha"}},
            },
            {"id": "skipped", "type": "test_count"},
            {
                "id": "join",
                "type": "output",
                "params": {
                    "select": "{words: words.words, keys: keys}",
                    "message": "joined {{ output.words }} words",
                },
            },
        ],
        [
            {"from": "start", "to": "words"},
            {"from": "start", "to": "keys"},
            {"from": "start", "to": "skipped", "when": "input.extra"},
            {"from": "words", "to": "join"},
            {"from": "keys", "to": "join"},
            {"from": "skipped", "to": "join"},
        ],
    )
    handle = await runner.start(spec, {"extra": False})
    result = await handle.result()
    assert result.output == {"words": 3, "keys": ["alpha", "beta"]}
    statuses = [(r.node_id, r.status) for r in result.node_reports]
    assert statuses.count(("join", NodeStatus.SUCCESS)) == 1
    assert ("skipped", NodeStatus.SKIPPED) in statuses
    messages = await runner.messages(handle.id)
    assert [m["t"] for m in messages if m.get("i") == "join.1"] == [M.ANSWER]
