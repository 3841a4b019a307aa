"""A run held at its budget holds its workstreams too (docs/graphs/budgets.md,
"Workstreams at a cap"), on the time-skipping server with the production worker.

The parent's token cap is reached by its child's spend; the parent then pauses at
its own agent's turn and its running child (real ``Workstream``, offline LLM)
gets a ``pause_requested`` steer of origin ``budget``: no LLM turn of the child
starts for days, a user's resume does not lift that hold, and a raise resumes
both. While the run is paused a ``LaunchWorkstream`` update is refused (409)
naming the cap, rather than left waiting for a raise. A run terminated from
outside (no ``finish_run``) keeps the budget it last recorded on
``GET /runs/{id}`` (``describe_run``, the route's lookup).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from spindle.gateway.runs.lookup import describe_run
from spindle.shared.contracts.budgets import (
    RAISE_BUDGET_UPDATE,
    BudgetAck,
    BudgetRaise,
    RunBudget,
)
from spindle.shared.contracts.errors import BudgetRefused
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    RunStatus,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    CHILD_STATE_QUERY,
    LAUNCH_WORKSTREAM_UPDATE,
    MESSAGE_WORKSTREAM_UPDATE,
    STEER_WORKSTREAM_UPDATE,
    ChildState,
    LaunchAck,
    LaunchRequest,
    MessageWorkstream,
    SteerAck,
    SteerCommand,
    SteerRequest,
    SteerWorkstream,
    WorkstreamAgent,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import LLM_TURN
from tests.workflow.runs import GraphRunner, M, cancel_run, eventually
from tests.workflow.workstream_parents import refused

pytestmark = pytest.mark.workflow

# A prompt, an agent, a prompt: the run waits at the first while a child is
# launched, and at the last until the test is done with the child.
PROMPT_THEN_AGENT = parse_graph(
    {
        "name": "budget-parent",
        "entry": "hold",
        "nodes": [
            {"id": "hold", "type": "prompt", "params": {"prompt": "Go on?"}},
            {
                "id": "solver",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": 3, "prompt": "what is 2 + 2?"},
            },
            {"id": "done", "type": "prompt", "params": {"prompt": "Done?"}},
        ],
        "edges": [{"from": "hold", "to": "solver"}, {"from": "solver", "to": "done"}],
    }
)

CHILD = LaunchRequest(
    task="what is 3 + 3?", interactive=True, agent=WorkstreamAgent(tools=["calculator"])
)


async def _start(runner: GraphRunner, run_input: GraphRunInput) -> WorkflowHandle[Any, Any]:
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=f"{run_input.graph.name}-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    await runner.wait_for_prompt(handle, "hold")
    return handle


async def _paused(runner: GraphRunner, handle: WorkflowHandle[Any, Any]) -> RunDescription:
    async def probe() -> RunDescription | None:
        described = await runner.describe(handle)
        budget = described.budget
        held = budget is not None and budget.paused and described.status is RunStatus.PAUSED
        return described if held else None

    return await eventually(probe, what="the run paused at its budget")


async def _llm_turns(handle: WorkflowHandle[Any, Any]) -> int:
    """``llm_turn`` activities the workflow scheduled so far."""
    history = await handle.fetch_history()
    return sum(
        1
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == LLM_TURN
    )


async def _child_state(child: WorkflowHandle[Any, Any]) -> ChildState:
    state: ChildState = await child.query(CHILD_STATE_QUERY, result_type=ChildState)
    return state


async def _raise(handle: WorkflowHandle[Any, Any], **caps: Any) -> BudgetAck:
    ack: BudgetAck = await handle.execute_update(
        RAISE_BUDGET_UPDATE, BudgetRaise(**caps), result_type=BudgetAck
    )
    return ack


async def _steer(handle: WorkflowHandle[Any, Any], command: SteerCommand) -> SteerAck:
    request = SteerWorkstream(launch_id="ws-1", steer=SteerRequest(command=command))
    ack: SteerAck = await handle.execute_update(
        STEER_WORKSTREAM_UPDATE, request, result_type=SteerAck
    )
    return ack


async def test_a_paused_run_holds_its_running_child_for_days_and_a_raise_resumes_it(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    handle = await _start(
        runner, GraphRunInput(graph=PROMPT_THEN_AGENT, budget=RunBudget(max_llm_tokens=1))
    )
    ack: LaunchAck = await handle.execute_update(
        LAUNCH_WORKSTREAM_UPDATE, CHILD, result_type=LaunchAck
    )
    child = runner.client.get_workflow_handle(ack.child_workflow_id)

    # The child's first turn spends past the run's cap: the run holds it.
    async def held() -> ChildState | None:
        state = await _child_state(child)
        return state if state.budget_held else None

    await eventually(held, what="the child held by the run's budget")
    await runner.answer(handle, UserInput(message="yes"))
    await _paused(runner, handle)  # the run's own agent waits at the cap too

    # A user's resume does not lift the budget's hold; a message waits with it.
    await _steer(handle, SteerCommand.RESUME_REQUESTED)
    message = MessageWorkstream(
        launch_id="ws-1", message=WorkstreamMessageRequest(message="status?")
    )
    await handle.execute_update(
        MESSAGE_WORKSTREAM_UPDATE, message, result_type=WorkstreamMessageAck
    )

    async def resume_refused() -> list[dict[str, Any]] | None:
        found = await runner.messages(handle.id)
        acks = [
            m
            for m in found
            if m["t"] == M.SYSTEM
            and m.get("d", {}).get("command") == "resume_requested"
            and m["d"].get("origin") == "user"
        ]
        return acks or None

    [user_resume] = await eventually(resume_refused, what="the child's answer to the resume")
    assert "held by the run's budget" in user_resume["m"]
    turns = await _llm_turns(child)

    await time_skipping_env.sleep(timedelta(days=3))
    assert await _llm_turns(child) == turns, "no LLM turn of the child starts while held"
    state = await _child_state(child)
    assert state.budget_held
    assert (await runner.describe(handle)).status is RunStatus.PAUSED

    raised = await _raise(handle, max_llm_tokens=1_000_000)
    assert raised.resumed

    async def answered() -> ChildState | None:
        state = await _child_state(child)
        done = not state.budget_held and "status?" in (state.last_answer or "")
        return state if done and state.waiting_for_message else None

    await eventually(answered, what="the child resumed and answered the message")
    assert await _llm_turns(child) > turns
    budget_steers = [
        m["d"]["command"]
        for m in await runner.messages(handle.id)
        if m["t"] == M.SYSTEM
        and m.get("d", {}).get("origin") == "budget"
        and m["d"].get("status") == "applied"
    ]
    assert budget_steers == ["pause_requested", "resume_requested"]
    await runner.wait_for_prompt(handle, "done")
    await runner.answer(handle, UserInput(message="yes"))
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED


async def test_a_launch_while_the_run_is_paused_is_refused_naming_the_cap(
    runner: GraphRunner,
) -> None:
    handle = await _start(
        runner, GraphRunInput(graph=PROMPT_THEN_AGENT, budget=RunBudget(max_llm_tokens=1))
    )
    await runner.answer(handle, UserInput(message="yes"))
    await _paused(runner, handle)
    error = await refused(
        handle.execute_update(LAUNCH_WORKSTREAM_UPDATE, CHILD, result_type=LaunchAck)
    )
    assert error.type == BudgetRefused.application_type
    assert "max_llm_tokens reached" in error.message
    assert "launches no workstream until the budget is raised" in error.message

    await _raise(handle, max_llm_tokens=1_000_000)
    await runner.wait_for_prompt(handle, "done")
    launched: LaunchAck = await handle.execute_update(
        LAUNCH_WORKSTREAM_UPDATE, CHILD, result_type=LaunchAck
    )
    assert launched.launch_id == "ws-1", "the refusal left no trace"
    await cancel_run(handle)


async def test_a_run_terminated_from_outside_keeps_its_last_budget_on_get_runs(
    runner: GraphRunner,
    worker_settings: Settings,
    time_skipping_env: WorkflowEnvironment,
) -> None:
    handle = await _start(
        runner, GraphRunInput(graph=PROMPT_THEN_AGENT, budget=RunBudget(max_llm_tokens=1))
    )
    await runner.answer(handle, UserInput(message="yes"))
    spent = (await _paused(runner, handle)).budget
    assert spent is not None and spent.usage.llm_tokens > 1
    await handle.terminate(reason="operator stopped it")

    with time_skipping_env.auto_time_skipping_disabled():
        detail = await describe_run(
            handle.id,
            temporal=runner.client,
            archive=runner.archive,
            settings=worker_settings,
            base_url="http://spindle.test",
            bus=runner.bus,
        )
    assert detail.status == "terminated"
    assert detail.budget is not None, "the budget the run last recorded"
    assert detail.budget.usage == spent.usage
    assert detail.budget.limits.max_llm_tokens == 1
    assert detail.budget.exhausted == spent.exhausted
    assert detail.budget.paused is False
    record = await runner.archive.get_run(handle.id)
    assert record is not None and record.budget is not None, "kept on the run's document"
