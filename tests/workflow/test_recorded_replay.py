"""Recorded replay: a fork with recorded tools and LLM answers every call from its
source run's records (docs/replay-and-compare.md#recorded-replay).

What a user checks: the fork's output is the source's, no tool ran and the model
was not asked again, its tool messages say ``d.recorded``; a fork whose candidate
asks a tool something new fails naming node and tool (``on_miss: "fail"``), or
calls it (``on_miss: "live"``).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError

from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
    UserInput,
)
from spindle.shared.graphs.forks import build_fork_input
from spindle.worker.examples import load_example
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.tools.registry import ToolDef
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

# graph name → (run input, the answer to its prompt, if it has one)
EXAMPLES: dict[str, tuple[Any, UserInput | None]] = {
    "research-agent": ({"question": "What is Temporal? And what is 17 * 3?"}, None),
    "pipeline": ({"text": "The export is broken and slow, I want a refund."}, None),
    "review-triage": (
        {
            "reviews": [
                {"id": "r1", "text": "Great product, fast and easy"},
                {"id": "r2", "text": "Broken again, I want a refund"},
                {"text": "It arrived on Tuesday"},
            ]
        },
        None,
    ),
    "approval-flow": (
        {"topic": "durable runs"},
        UserInput(data={"decision": "approve", "comment": "ship it"}, client_message_id="m1"),
    ),
    "delegation": ({"topic": "durable execution"}, None),
}


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Counts what really ran in this process's worker: ``tool:<name>`` per tool
    execution, ``llm`` per model reply."""
    counts: Counter[str] = Counter()
    tool_call = ToolDef.call
    respond = OfflineProvider.respond

    async def counted_call(self: ToolDef, *args: Any, **kwargs: Any) -> Any:
        counts[f"tool:{self.name}"] += 1
        return await tool_call(self, *args, **kwargs)

    def counted_respond(self: OfflineProvider, *args: Any, **kwargs: Any) -> Any:
        counts["llm"] += 1
        return respond(self, *args, **kwargs)

    monkeypatch.setattr(ToolDef, "call", counted_call)
    monkeypatch.setattr(OfflineProvider, "respond", counted_respond)
    yield counts


async def _run(
    runner: GraphRunner, run_input: GraphRunInput, answer: UserInput | None, prefix: str
) -> tuple[str, GraphRunResult]:
    workflow_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=workflow_id,
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    if answer is not None:
        prompt = await runner.wait_for_prompt(handle, "review")
        assert prompt.pending_input is not None
        await runner.answer(handle, answer)
    return workflow_id, await handle.result()


def _fork(source: GraphRunInput, source_id: str, **request: Any) -> GraphRunInput:
    """The fork's start input, built as ``POST /runs/{id}/fork`` builds it."""
    return build_fork_input(
        source,
        {},
        ForkRequest(**request),
        source_workflow_id=source_id,
        candidate=None,
        tenant_id=source.tenant_id,
        user_id=source.user_id,
    )


async def _source(runner: GraphRunner, name: str) -> tuple[GraphRunInput, str, GraphRunResult]:
    data, answer = EXAMPLES[name]
    run_input = GraphRunInput(graph=load_example(name), input=data)
    source_id, result = await _run(runner, run_input, answer, f"src-{name}")
    assert result.status is RunStatus.COMPLETED, result
    return run_input, source_id, result


@pytest.mark.parametrize("name", sorted(EXAMPLES))
async def test_a_pure_recorded_replay_runs_nothing_and_ends_the_same(
    runner: GraphRunner, executions: Counter[str], name: str
) -> None:
    run_input, source_id, source = await _source(runner, name)
    ran = sum(executions.values())
    assert ran > 0  # the source did call its tools (or model)

    executions.clear()
    fork_input = _fork(run_input, source_id, tools="recorded", llm="recorded")
    fork_id, fork = await _run(runner, fork_input, EXAMPLES[name][1], f"fork-{name}")

    assert fork.status is RunStatus.COMPLETED, fork
    assert fork.output == source.output
    assert executions == Counter()  # no tool execution, no model reply
    messages = await runner.messages(fork_id)
    flagged = [m for m in messages if "recorded" in (m.get("d") or {})]
    assert all(m["d"]["recorded"] is True for m in flagged)
    if name != "review-triage":  # a map's items post no message per call
        assert flagged, "no message says it was recorded"


async def test_on_miss_fail_names_the_node_and_the_tool(
    runner: GraphRunner, executions: Counter[str]
) -> None:
    run_input, source_id, _ = await _source(runner, "research-agent")
    executions.clear()
    fork_input = _fork(
        run_input,
        source_id,
        tools="recorded",
        llm="live",
        on_miss="fail",
        overrides={"researcher": {"params": {"prompt": "What do the notes say about Redis?"}}},
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await _run(runner, fork_input, None, "miss-fail")
    text = _causes(failed.value)
    assert "no recorded call matches node 'researcher', tool 'search_notes'" in text, text
    assert "Redis" in text  # its arguments
    assert not [k for k in executions if k.startswith("tool:")]


async def test_on_miss_live_calls_the_tool(runner: GraphRunner, executions: Counter[str]) -> None:
    run_input, source_id, source = await _source(runner, "research-agent")
    executions.clear()
    fork_input = _fork(
        run_input,
        source_id,
        tools="recorded",
        llm="live",
        on_miss="live",
        overrides={"researcher": {"params": {"prompt": "What do the notes say about Redis?"}}},
    )
    fork_id, fork = await _run(runner, fork_input, None, "miss-live")
    assert fork.status is RunStatus.COMPLETED
    assert fork.output != source.output
    assert executions["tool:search_notes"] == 1
    used = [
        m["d"]
        for m in await runner.messages(fork_id)
        if (m.get("d") or {}).get("tool") == "search_notes" and "arguments" in m["d"]
    ]
    assert used and used[0]["recorded"] is False


def _causes(error: BaseException | None) -> str:
    """Every message along an error's cause chain."""
    parts = []
    while error is not None:
        parts.append(str(error))
        error = error.__cause__
    return " / ".join(parts)


async def test_a_tool_node_asked_something_new_fails_naming_node_and_tool(
    runner: GraphRunner, executions: Counter[str]
) -> None:
    run_input, source_id, _ = await _source(runner, "pipeline")
    executions.clear()
    fork_input = _fork(
        run_input, source_id, tools="recorded", input={"text": "A calm and ordinary day."}
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await _run(runner, fork_input, None, "node-miss")
    text = _causes(failed.value)
    assert "no recorded call matches node 'keywords', tool 'extract_keywords'" in text, text
    assert "A calm and ordinary day." in text
    assert executions == Counter()
