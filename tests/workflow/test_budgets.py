"""Budgets and deadlines (docs/graphs/budgets.md) on the time-skipping server.

Budgets with the production worker and the deterministic offline LLM (which
reports token usage): a run at its token cap pauses before its next step, says
which limit on its stream, shows ``paused`` with limits and usage, and resumes
when the cap is raised; ``on_exhausted: fail`` fails the run naming the limit;
a paused run can be cancelled. Deadlines with the scripted child
(``tests.workflow.workstream_parents``): a child's deadline is cut to the
run's remaining time, an extension past the run's is refused, and at the run's
deadline the children are stopped (``cancel_children``) or left to end
(``let_finish``).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.contracts.budgets import (
    EXTEND_WORKSTREAM_DEADLINE_UPDATE,
    RAISE_BUDGET_UPDATE,
    BudgetAck,
    BudgetLimit,
    BudgetLimits,
    BudgetRaise,
    DeadlineAck,
    DeadlineExtension,
    ExtendWorkstreamDeadline,
    RunBudget,
)
from spindle.shared.contracts.errors import (
    BudgetRefused,
    DeadlineRefused,
    RunDeadlineExceeded,
)
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    RunStatus,
)
from spindle.shared.contracts.workstreams import (
    LAUNCH_WORKSTREAM_UPDATE,
    WORKSTREAMS_QUERY,
    LaunchAck,
    LaunchRequest,
    WorkstreamAgent,
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamState,
)
from spindle.shared.graphs.structure import parse_graph
from tests.workflow.runs import GraphRunner, M, cancel_run, eventually, types_of
from tests.workflow.workstream_parents import HOLD, Parents, refused

pytestmark = pytest.mark.workflow

AGENT = parse_graph(
    {
        "name": "budgeted",
        "entry": "solver",
        "nodes": [
            {
                "id": "solver",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": 3, "prompt": "what is 2 + 2?"},
            }
        ],
        "edges": [],
    }
)


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
        try:
            described = await runner.describe(handle)
        except RPCError:
            # Asked while the run continues as new: the query met the closing
            # generation; the gateway asks again too (docs/graphs/long-runs.md).
            return None
        return described if described.status is RunStatus.PAUSED else None

    return await eventually(probe, what="the run paused at its budget")


# -- budgets ------------------------------------------------------------------------------


async def test_a_run_at_its_token_cap_pauses_says_why_and_resumes_when_raised(
    runner: GraphRunner,
) -> None:
    budget = RunBudget(max_llm_tokens=5, max_tool_calls=10)
    handle = await _start(runner, GraphRunInput(graph=AGENT, budget=budget))

    # Turn 1 spent more than 5 tokens: its tool call does not start.
    paused = await _paused(runner, handle)
    assert paused.budget is not None
    assert paused.budget.exhausted is BudgetLimit.MAX_LLM_TOKENS
    assert paused.budget.paused
    assert paused.budget.limits.max_llm_tokens == 5
    first_turn = paused.budget.usage.llm_tokens
    assert first_turn > 5
    assert paused.budget.usage.tool_calls == 0
    messages = await runner.messages(handle.id)
    warning = [m for m in messages if m["t"] == M.WARNING][-1]
    assert "max_llm_tokens" in warning["m"]
    assert warning["d"]["budget"]["exhausted"] == "max_llm_tokens"
    assert M.UPDATE not in types_of(messages), "no tool call started"

    low = await refused(
        handle.execute_update(
            RAISE_BUDGET_UPDATE, BudgetRaise(max_llm_tokens=first_turn - 1), result_type=BudgetAck
        )
    )
    assert low.type == BudgetRefused.application_type
    assert "max_llm_tokens" in low.message

    ack = await handle.execute_update(
        RAISE_BUDGET_UPDATE, BudgetRaise(max_llm_tokens=10_000), result_type=BudgetAck
    )
    assert ack.resumed
    assert ack.budget.limits.max_llm_tokens == 10_000
    assert ack.budget.limits.max_tool_calls == 10, "caps not given stay as they were"

    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.budget is not None
    assert result.budget.usage.tool_calls == 1
    assert result.budget.usage.llm_tokens > first_turn
    assert result.budget.exhausted is None
    texts = [m.get("m", "") for m in await runner.messages(handle.id)]
    assert "budget raised: the run resumes" in texts


async def test_on_exhausted_fail_fails_the_run_naming_the_limit(runner: GraphRunner) -> None:
    budget = RunBudget(max_llm_tokens=5, on_exhausted="fail")
    handle = await _start(runner, GraphRunInput(graph=AGENT, budget=budget))
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert "budget exhausted: max_llm_tokens" in cause.message
    described = await runner.describe(handle)
    assert described.status is RunStatus.FAILED
    assert described.error is not None and "max_llm_tokens" in described.error
    assert cause.type == "NodeFailed"
    assert "on_exhausted: fail" in cause.message


async def test_a_run_paused_at_its_budget_can_be_cancelled(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    handle = await _start(runner, GraphRunInput(graph=AGENT, budget=RunBudget(max_llm_tokens=5)))
    await _paused(runner, handle)
    await cancel_run(handle)
    # In real time: while it delivers a cancel, this server may skip far ahead.
    with time_skipping_env.auto_time_skipping_disabled(), pytest.raises(WorkflowFailureError):
        await handle.result()
    # Temporal's status, as GET /runs reads a closed run (the query of a closed run
    # replays it, and this server has answered it from before the cancel).
    assert (await handle.describe()).status is WorkflowExecutionStatus.CANCELED
    assert types_of(await runner.messages(handle.id))[-1] is M.TERMINATED


async def test_the_tool_call_cap_holds_tool_calls_only(runner: GraphRunner) -> None:
    handle = await _start(runner, GraphRunInput(graph=AGENT, budget=RunBudget(max_tool_calls=1)))
    result = await handle.result()  # one tool call, then the answer: within the cap
    assert result.status is RunStatus.COMPLETED
    assert result.budget is not None
    assert result.budget.usage.tool_calls == 1
    assert result.budget.exhausted is BudgetLimit.MAX_TOOL_CALLS


# -- workstream budgets and deadlines ------------------------------------------------------


async def _hold(parents: Parents, run_input: GraphRunInput) -> WorkflowHandle[Any, Any]:
    handle = await _start(parents.runner, run_input)
    await parents.runner.wait_for_prompt(handle, "hold")
    return handle


async def test_a_child_budget_must_fit_the_parent_remainder(parents: Parents) -> None:
    handle = await _hold(parents, GraphRunInput(graph=HOLD, budget=RunBudget(max_llm_tokens=1000)))
    too_big = await refused(
        parents.launch(
            handle, LaunchRequest(task="slow a", budget=BudgetLimits(max_llm_tokens=1001))
        )
    )
    assert too_big.type == BudgetRefused.application_type
    assert "max_llm_tokens" in too_big.message
    unbounded = await refused(
        parents.launch(handle, LaunchRequest(task="slow b", budget=BudgetLimits(max_tool_calls=3)))
    )
    assert unbounded.type == BudgetRefused.application_type, "no token cap would not fit"

    await parents.launch(
        handle, LaunchRequest(task="slow c", budget=BudgetLimits(max_llm_tokens=600))
    )
    described = await parents.runner.describe(handle)
    assert described.budget is not None
    assert described.budget.reserved.llm_tokens == 600
    second = await refused(
        parents.launch(
            handle, LaunchRequest(task="slow d", budget=BudgetLimits(max_llm_tokens=500))
        )
    )
    assert "400 left" in second.message
    await cancel_run(handle)


async def test_a_child_deadline_is_cut_to_the_parent_and_extends_only_within_it(
    parents: Parents,
) -> None:
    handle = await _hold(parents, GraphRunInput(graph=HOLD, deadline_seconds=200))
    ack = await parents.launch(handle, LaunchRequest(task="slow a", deadline_seconds=600))
    assert ack.deadline_seconds <= 200, "never past the parent's deadline"
    assert ack.deadline_seconds >= 190
    short = await parents.launch(handle, LaunchRequest(task="slow b", deadline_seconds=60))
    assert short.deadline_seconds == 60

    def extend(launch_id: str, seconds: int) -> Any:
        request = ExtendWorkstreamDeadline(
            launch_id=launch_id, extension=DeadlineExtension(extend_seconds=seconds)
        )
        return handle.execute_update(
            EXTEND_WORKSTREAM_DEADLINE_UPDATE, request, result_type=DeadlineAck
        )

    extended = await extend("ws-2", 100)
    assert extended.deadline_seconds == 160
    (_, info) = await parents.workstreams(handle)
    assert info.deadline_seconds == 160
    beyond = await refused(extend("ws-2", 100))
    assert beyond.type == DeadlineRefused.application_type
    assert (await refused(extend("ws-9", 10))).type == "UnknownWorkstream"

    # 60 s (its first deadline) pass: the extended child still runs.
    await parents.skip_to_just_before(70)
    (_, info) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.RUNNING
    await cancel_run(handle)


async def test_the_run_deadline_cuts_its_children_and_ends_the_run_timed_out(
    parents: Parents,
) -> None:
    handle = await _hold(parents, GraphRunInput(graph=HOLD, deadline_seconds=100))
    ack = await parents.launch(handle, LaunchRequest(task="slow survey", deadline_seconds=600))
    assert ack.deadline_seconds <= 100
    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()  # 100 s pass here, skipped
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == RunDeadlineExceeded.application_type
    assert "deadline (100 s)" in cause.message
    described = await parents.runner.describe(handle)
    assert described.status is RunStatus.TIMED_OUT
    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.TIMEOUT, "stopped at the parent's deadline"
    log = await parents.stub_log(handle.id, "ws-1")
    assert [e.detail for e in log.events if e.kind == "stop"] == [{"reason": "timeout"}]
    kinds = types_of(await parents.runner.messages(handle.id))
    assert kinds[-1] is M.TERMINATED


@pytest.mark.parametrize("policy", ["cancel_children", "let_finish"])
async def test_a_cancelled_run_stops_or_lets_its_children_finish_by_its_policy(
    parents: Parents, policy: str
) -> None:
    run_input = GraphRunInput.model_validate({"graph": HOLD, "children_policy": policy})
    handle = await _hold(parents, run_input)
    await parents.launch(handle, LaunchRequest(task="slow survey", deadline_seconds=60))
    await cancel_run(handle)
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    assert (await handle.describe()).status is WorkflowExecutionStatus.CANCELED
    (info,) = await parents.workstreams(handle)
    log = await parents.stub_log(handle.id, "ws-1")
    stops = [e.detail["reason"] for e in log.events if e.kind == "stop"]
    if policy == "cancel_children":
        assert stops == ["parent_canceled"]
        assert info.state is WorkstreamState.CANCELED
    else:
        # Not stopped by the parent: it ran on to its own deadline.
        assert stops == ["timeout"]
        assert info.state is WorkstreamState.TIMEOUT
        assert info.elapsed_seconds >= 60


async def test_a_childs_spend_counts_against_its_parent_and_its_own_budget_stops_it(
    runner: GraphRunner,
) -> None:
    # The production worker: real Workstream children with the offline LLM.
    handle = await _start(
        runner, GraphRunInput(graph=HOLD, budget=RunBudget(max_llm_tokens=100_000))
    )
    await runner.wait_for_prompt(handle, "hold")
    agent = WorkstreamAgent(tools=["calculator"])
    for request in (
        LaunchRequest(task="what is 2 + 2?", agent=agent),
        LaunchRequest(task="what is 3 + 3?", agent=agent, budget=BudgetLimits(max_llm_tokens=5)),
    ):
        await handle.execute_update(LAUNCH_WORKSTREAM_UPDATE, request, result_type=LaunchAck)

    async def both_ended() -> list[WorkstreamInfo] | None:
        listed = await handle.query(WORKSTREAMS_QUERY, result_type=WorkstreamList)
        infos = listed.workstreams
        return infos if all(i.state.finished for i in infos) else None

    free, capped = await eventually(both_ended, what="both children end")
    assert free.state is WorkstreamState.COMPLETED
    assert capped.state is WorkstreamState.FAILED
    assert capped.error is not None and "max_llm_tokens" in capped.error
    assert free.usage is not None and capped.usage is not None
    assert free.usage.tool_calls == 1
    assert capped.usage.tool_calls == 0, "stopped at its cap before the tool call"

    async def released() -> RunDescription | None:
        # The reservation goes back once the parent has settled the child's end.
        described = await runner.describe(handle)
        budget = described.budget
        return described if budget is not None and budget.reserved.llm_tokens == 0 else None

    described = await eventually(released, what="the capped child's reservation released")
    assert described.budget is not None
    usage = described.budget.usage
    assert usage.llm_tokens == free.usage.llm_tokens + capped.usage.llm_tokens
    assert usage.tool_calls == 1
    await cancel_run(handle)


LOOP = parse_graph(
    {
        "name": "budget-loop",
        "entry": "start",
        "nodes": [
            {
                "id": "start",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            {
                "id": "work",
                "type": "tool",
                "max_visits": 21,
                "params": {"tool": "word_count", "args": {"text": "b"}},
            },
            {
                "id": "check",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "c"}},
            },
            {"id": "done", "type": "output", "params": {"select": "check"}},
        ],
        "edges": [
            {"from": "start", "to": "work"},
            {"from": "work", "to": "check"},
            {"from": "check", "to": "work", "max_iterations": 20},
            {"from": "check", "to": "done"},
        ],
    }
)


async def test_usage_is_carried_across_continue_as_new_and_tool_nodes_count(
    runner: GraphRunner,
) -> None:
    # 1 + 21 + 21 tool nodes; the cap of 30 falls after the run has continued as new.
    run_input = GraphRunInput(
        graph=LOOP, budget=RunBudget(max_tool_calls=30), continue_as_new_after_events=100
    )
    first = await _start(runner, run_input)
    latest = runner.client.get_workflow_handle(first.id, result_type=GraphRunResult)
    paused = await _paused(runner, latest)
    assert paused.generation > 1
    assert paused.budget is not None
    assert paused.budget.usage.tool_calls == 30
    assert paused.budget.exhausted is BudgetLimit.MAX_TOOL_CALLS

    await latest.execute_update(
        RAISE_BUDGET_UPDATE, BudgetRaise(max_tool_calls=100), result_type=BudgetAck
    )
    result = await latest.result()
    assert result.status is RunStatus.COMPLETED
    assert result.budget is not None
    assert result.budget.usage.tool_calls == 43
    assert result.budget.limits.max_tool_calls == 100


async def test_each_map_item_counts_as_a_tool_call(runner: GraphRunner) -> None:
    spec = parse_graph(
        {
            "name": "budget-map",
            "entry": "numbers",
            "nodes": [
                {
                    "id": "numbers",
                    "type": "map",
                    "params": {
                        "over": "input",
                        "node": {
                            "type": "tool",
                            "params": {"tool": "calculator", "args": {"expression": "{{ item }}"}},
                        },
                    },
                },
                {
                    "id": "again",
                    "type": "tool",
                    "params": {"tool": "word_count", "args": {"text": "x"}},
                },
            ],
            "edges": [{"from": "numbers", "to": "again"}],
        }
    )
    run_input = GraphRunInput(graph=spec, input=[1, 2, 3, 4, 5], budget=RunBudget(max_tool_calls=5))
    handle = await _start(runner, run_input)
    # The map's five items reach the cap: the tool node after it waits.
    paused = await _paused(runner, handle)
    assert paused.budget is not None
    assert paused.budget.usage.tool_calls == 5
    assert paused.current_nodes == ["again"]
    await cancel_run(handle)
