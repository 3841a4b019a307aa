"""A parent agent hears the workstreams it launched (issue 27 item 3), and a parent that
only waits while messages flow to its children continues as new (item 6).

The children are the stub (``tests.workflow.stub_workstream``): a task starting
``slow`` runs until stopped, any other completes at once with ``done: <task>``; an
interactive one answers each message with a progress signal.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    MESSAGE_WORKSTREAM_UPDATE,
    TERMINATE_WORKSTREAM_UPDATE,
    LaunchRequest,
    MessageWorkstream,
    TerminateAck,
    TerminateWorkstream,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
    WorkstreamState,
)
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import ToolCall
from spindle.worker.examples import load_examples
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.offerings import build_catalog
from spindle.worker.workflows.workstreams.parent_tools import WorkstreamToolbox
from tests.workflow.runs import M, eventually, is_subsequence, types_of
from tests.workflow.workstream_parents import (
    Parents,
    graph,
    parents_with_stub_children,
    production_runner,
)

pytestmark = pytest.mark.workflow


def _lead(*tools: str) -> dict[str, Any]:
    return {"id": "lead", "type": "agent", "params": {"tools": list(tools), "max_turns": 3}}


async def test_an_agent_waits_for_its_workstream_with_the_tool_and_answers_from_it(
    parents: Parents,
) -> None:
    spec = graph("hear-wait", _lead("launch_workstream", "wait_workstreams"))
    validate_graph(spec, build_catalog())
    handle = await parents.runner.start(spec, "Compare Temporal and Cadence")
    result = await handle.result()

    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.COMPLETED
    # The model's answer is built from the wait's result: the child's report.
    assert "[workstream result] Workstream ws-1 completed" in result.output
    assert "done: Compare Temporal and Cadence" in result.output
    messages = await parents.runner.messages(handle.id)
    kinds = types_of(messages)
    # The child ended (its SYSTEM message) before the lead answered.
    assert kinds.index(M.SYSTEM) < kinds.index(M.ANSWER) < kinds.index(M.COMPLETE)


async def test_waiting_without_a_timeout_lasts_until_the_child_times_out(
    parents: Parents,
) -> None:
    spec = graph("hear-slow", _lead("launch_workstream", "wait_workstreams"))
    handle = await parents.runner.start(spec, "slow research on otters")
    result = await handle.result()
    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.TIMEOUT
    assert "ws-1 timed out (state: timeout)" in result.output
    assert "partial: two of three sources read" in result.output


# -- at the turn boundary (the agent's session) -----------------------------------------


async def test_a_lead_hears_its_workstream_at_the_next_boundary_and_answers_from_it(
    parents: Parents,
) -> None:
    spec = graph("hear-boundary", _lead("launch_workstream"))
    handle = await parents.runner.start(spec, "Compare Temporal and Cadence")
    result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert "From the workstreams:" in result.output
    assert "Workstream ws-1 completed (state: completed)" in result.output
    assert "done: Compare Temporal and Cadence" in result.output
    messages = await parents.runner.messages(handle.id)
    answers = [m["m"] for m in messages if m["t"] == M.ANSWER]
    assert answers[-1] == result.output and "From the workstreams:" not in answers[0]


@pytest.fixture(scope="module")
async def paced(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[Parents]:
    """Stub children; an offline model that streams slowly (its turns last seconds)."""
    async with parents_with_stub_children(
        time_skipping_env,
        worker_settings,
        run_bus,
        run_archive,
        provider=OfflineProvider(token_delay=0.15),
    ) as parents:
        yield parents


async def test_a_child_ending_during_an_llm_turn_is_heard_at_the_next_boundary(
    paced: Parents,
) -> None:
    spec = graph("hear-mid-turn", _lead("launch_workstream"))
    handle = await paced.runner.start(spec, "Compare Temporal and Cadence")
    result = await handle.result()

    messages = await paced.runner.messages(handle.id)
    kinds = types_of(messages)
    ended = next(
        i for i, m in enumerate(messages) if m["t"] == M.SYSTEM and "ws-1 completed" in m["m"]
    )
    answers = [i for i, k in enumerate(kinds) if k is M.ANSWER]
    # The child ended while the lead's second turn streamed its answer: that turn
    # was not given the result (nothing joins a turn in flight), the next one was.
    assert ended < answers[0], "the child should end while the second turn streams"
    assert "From the workstreams:" not in messages[answers[0]]["m"]
    assert "done: Compare Temporal and Cadence" in result.output
    assert len(answers) == 2


async def test_an_agent_that_answered_waits_idle_for_its_running_children(
    parents: Parents,
) -> None:
    spec = graph("hear-idle", _lead("launch_workstream"))
    handle = await parents.runner.start(spec, "slow research on otters")
    result = await handle.result()

    assert "ws-1 timed out (state: timeout)" in result.output
    assert "partial: two of three sources read" in result.output
    messages = await parents.runner.messages(handle.id)
    kinds = types_of(messages)
    idle = messages[kinds.index(M.IDLE)]
    assert idle["d"]["waiting_for"] == ["ws-1"] and "ws-1" in idle["m"]
    first, last = [i for i, k in enumerate(kinds) if k is M.ANSWER]
    assert first < kinds.index(M.IDLE) < last  # answered, waited, answered from the result


async def test_an_agent_waiting_for_its_child_continues_as_new_and_still_hears_it(
    parents: Parents,
) -> None:
    """The lead waits (IDLE) for ws-1 while messages flow to another child (ws-2): the
    run continues as new, carrying the waiting lead and both children; ws-1's end
    reaches the lead in a later generation."""
    workflow_id = f"hear-across-{uuid.uuid4().hex[:8]}"
    await parents.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=graph("hear-across", _lead("launch_workstream")),
            input="slow research on otters",
            continue_as_new_after_events=100,
        ),
        id=workflow_id,
        task_queue=parents.runner.task_queue,
        result_type=GraphRunResult,
    )
    latest = parents.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)
    await parents.runner.wait_for_message(workflow_id, M.IDLE)
    await parents.launch(latest, LaunchRequest(task="chat", interactive=True))
    for n in range(1, 41):
        await _exchange(parents, latest, n, launch_id="ws-2")
    # Stopped (no clock needed): the stub ends with its partial result and tells the
    # generation that adopted it.
    await latest.execute_update(
        TERMINATE_WORKSTREAM_UPDATE, TerminateWorkstream(launch_id="ws-1"), result_type=TerminateAck
    )
    result = await latest.result()

    assert result.status is RunStatus.COMPLETED
    assert len(await _generations(parents, workflow_id)) >= 3
    assert "ws-1 was stopped (state: canceled)" in result.output
    assert "partial: two of three sources read" in result.output
    kinds = types_of(await parents.runner.messages(workflow_id))
    assert kinds.count(M.IDLE) == 1 and kinds.count(M.ANSWER) == 2


async def test_the_delegation_example_answers_from_its_research(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> None:
    (spec,) = [g for g in load_examples() if g.name == "delegation"]
    validate_graph(spec, build_catalog())
    async with production_runner(
        time_skipping_env, worker_settings, run_bus, run_archive
    ) as runner:
        handle = await runner.start(spec, {"topic": "durable execution"})
        result = await handle.result()
        messages = await runner.messages(handle.id)

    assert result.status is RunStatus.COMPLETED
    answer = result.output["answer"]
    assert "From the workstreams:" in answer
    assert "Workstream ws-1 completed (state: completed)" in answer
    assert "Artifacts: files/ws-1/result.md" in answer
    child = [m for m in messages if m.get("w") == "ws-1"]
    assert types_of(child)[-1] is M.COMPLETE  # the child's own completion, on this stream
    main = types_of([m for m in messages if "w" not in m])
    # Launched, answered, (waited,) heard the child's end, answered from it; then the
    # output node's message and the run's COMPLETE.
    assert is_subsequence([M.THOUGHT, M.ANSWER, M.SYSTEM, M.ANSWER, M.COMPLETE], main), main
    if M.IDLE in main:  # the lead answered before the child ended, and waited for it
        assert main.index(M.ANSWER) < main.index(M.IDLE) < main.index(M.SYSTEM)


async def test_bad_tool_arguments_are_refused_before_anything_runs() -> None:
    toolbox = WorkstreamToolbox(None, ["launch_workstream", "wait_workstreams"], "lead")  # type: ignore[arg-type]
    refused = await toolbox.call(
        ToolCall(id="c1", name="launch_workstream", arguments={"task": "x", "wait": "yes"})
    )
    assert not refused.ok and "wait" in refused.content
    too_long = await toolbox.call(
        ToolCall(id="c2", name="wait_workstreams", arguments={"timeout_seconds": 10**6})
    )
    assert not too_long.ok and "timeout_seconds" in too_long.content


# -- a parent waiting at a prompt while messages flow to its interactive child ------------

MESSAGES = 240
AFTER_EVENTS = 400
#: Events a generation may add after the threshold: the activation that sees it, the
#: draining of updates in flight, the continue-as-new itself, and the retries of its
#: workflow task when a message meets it (the time-skipping server then fails that
#: task, UnhandledCommand, and the next one tries again once the message is delivered).
HANDOVER_SLACK = 150

CHAT_THEN_PROMPT = graph(
    "chat-at-prompt",
    {
        "id": "launch",
        "type": "workstream",
        "params": {"task": "chat with me", "interactive": True, "wait": False},
    },
    {"id": "hold", "type": "prompt", "params": {"prompt": "Done?"}},
    {"id": "done", "type": "output"},
)


async def _exchange(
    parents: Parents, handle: WorkflowHandle[Any, Any], n: int, *, launch_id: str = "ws-1"
) -> str:
    """Message ``n`` to ``launch_id``, then wait until the child has it: a user chatting,
    each message after the last was taken."""
    request = MessageWorkstream(
        launch_id=launch_id, message=WorkstreamMessageRequest(message=f"message {n}")
    )
    ack: WorkstreamMessageAck = await handle.execute_update(
        MESSAGE_WORKSTREAM_UPDATE, request, result_type=WorkstreamMessageAck
    )

    async def received() -> bool:
        # The child's own log: a query of the parent that meets it continuing as new
        # can be lost by the time-skipping server, and stop its clock with it.
        log = await parents.stub_log(handle.id, launch_id)
        return sum(1 for e in log.events if e.kind == "message") >= n

    # Generous: a generation that meets a message as it continues as new retries its
    # workflow task, replaying its history, on a machine the other tests share.
    await eventually(received, what=f"message {n} received", timeout=30.0)
    return ack.message_id


async def _generations(parents: Parents, workflow_id: str) -> list[int]:
    """Events per generation of the run, oldest first."""
    run_id = (await parents.client.get_workflow_handle(workflow_id).describe()).run_id
    counts: list[int] = []
    while run_id:
        history = await parents.client.get_workflow_handle(
            workflow_id, run_id=run_id
        ).fetch_history()
        counts.append(len(history.events))
        started = history.events[0]
        assert started.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
        run_id = started.workflow_execution_started_event_attributes.continued_execution_run_id
    return counts[::-1]


async def test_a_parent_waiting_at_a_prompt_continues_as_new_while_it_relays_messages(
    parents: Parents,
) -> None:
    workflow_id = f"chat-at-prompt-{uuid.uuid4().hex[:8]}"
    handle = await parents.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=CHAT_THEN_PROMPT, continue_as_new_after_events=AFTER_EVENTS),
        id=workflow_id,
        task_queue=parents.runner.task_queue,
        result_type=GraphRunResult,
    )
    await parents.runner.wait_for_prompt(handle, "hold")
    latest = parents.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)
    acks = [await _exchange(parents, latest, n) for n in range(1, MESSAGES + 1)]
    assert acks == [f"m-{n}" for n in range(1, MESSAGES + 1)]

    log = await parents.stub_log(workflow_id, "ws-1")
    received = [e.detail["text"] for e in log.events if e.kind == "message"]
    assert received == [f"message {n}" for n in range(1, MESSAGES + 1)]  # each once, in order

    # Closed, it reports its end to the latest generation (which adopted it).
    stopping = await latest.execute_update(
        TERMINATE_WORKSTREAM_UPDATE, TerminateWorkstream(launch_id="ws-1"), result_type=TerminateAck
    )
    assert stopping.state is WorkstreamState.CANCELING

    async def ended() -> bool:
        (info,) = await parents.workstreams(latest)
        return info.state is WorkstreamState.CANCELED

    await eventually(ended, what="ws-1 ended, as the latest generation sees it")
    await parents.runner.answer(latest, UserInput(message="yes"))
    result = await latest.result()
    assert result.status is RunStatus.COMPLETED
    assert result.output == {"hold_response": "yes"}

    counts = await _generations(parents, workflow_id)
    assert len(counts) >= 4, counts  # it continued as new while it waited
    assert max(counts) <= AFTER_EVENTS + HANDOVER_SLACK, counts
    messages = await parents.runner.messages(workflow_id)
    assert types_of(messages).count(M.REQUEST_INPUT) == 1  # asked once, answered later
