"""Record histories of the example graphs on the real dev server, and replay them.

Every run replays its fresh history against the current code (must pass). With
``SPINDLE_RECORD_HISTORIES=1`` the histories are also written to
``tests/histories/<graph>.json`` (commit them): ``python tests/histories/record.py``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from spindle.shared.contracts.runs import (
    CANCEL_IN_ACTIVITY_PATCH,
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    SignalAck,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    TERMINATE_WORKSTREAM_UPDATE,
    WORKSTREAMS_QUERY,
    TerminateAck,
    TerminateWorkstream,
    WorkstreamList,
    WorkstreamState,
)
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import POST_MESSAGE, RECORD_RUN_START, RunNotice, RunStart
from spindle.worker.examples import load_example
from spindle.worker.replay.histories import fetch_generations, record_history, save_history
from spindle.worker.replay.replayer import replay
from tests.chat_driver import chat_agent_graph, quoted, start_chat
from tests.integration.held_activity import LOOP_ONCE, HeldActivity, cancel_while_held
from tests.polling import eventually
from tests.workflow.loop_and_prompt import LOOP_AND_PROMPT
from tests.workflow.runs import GraphRunner, M
from tests.workflow.test_continue_as_new import WORKSTREAM_PROMPT_AND_LOOP

pytestmark = pytest.mark.integration

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
RECORD = os.environ.get("SPINDLE_RECORD_HISTORIES") == "1"

# graph name → (run input, answers to its prompts)
EXAMPLE_RUNS: dict[str, tuple[Any, list[UserInput]]] = {
    "pipeline": ({"text": "The export is broken and slow, I want a refund."}, []),
    "research-agent": ({"question": "What is Temporal? And what is 17 * 3?"}, []),
    "delegation": ({"topic": "durable execution"}, []),
    "review-triage": (
        {
            "reviews": [
                {"id": "r1", "text": "Great product, fast and easy"},
                {"id": "r2", "text": "Broken again, I want a refund"},
                {"text": "It arrived on Tuesday"},
            ]
        },
        [],
    ),
    "approval-flow": (
        {"topic": "durable runs"},
        [UserInput(data={"decision": "approve", "comment": "ship it"}, client_message_id="m1")],
    ),
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
async def test_example_history_replays(dev_runner: GraphRunner, name: str) -> None:
    run_input, answers = EXAMPLE_RUNS[name]
    history = await record_history(
        dev_runner.client,
        load_example(name),
        run_input,
        task_queue=dev_runner.task_queue,
        workflow_id=name if RECORD else f"{name}-{uuid.uuid4().hex[:8]}",
        stream_id=f"history-{name}-{uuid.uuid4().hex[:8]}",
        answers=answers,
    )
    kinds = [e.event_type for e in history.events]
    # Activities, remote or local (a local one's result is a marker).
    local = [
        e
        for e in history.events
        if e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    assert kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) + len(local) >= 3
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    accepted = kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert accepted == len(answers)

    histories = [(name, history)]
    if name == "delegation":
        # The child workstream's own history: its determinism is checked too.
        child = await dev_runner.client.get_workflow_handle(
            f"{history.workflow_id}.ws-1"
        ).fetch_history()
        histories.append((f"{name}.ws-1", child))
    assert await replay(histories) == []
    if RECORD:
        for _, each in histories:
            save_history(each, HISTORIES)


async def test_a_run_over_generations_replays(dev_runner: GraphRunner) -> None:
    """A loop that continues as new while a prompt waits: each generation replays."""
    workflow_id = "long-loop" if RECORD else f"long-loop-{uuid.uuid4().hex[:8]}"
    handle = await dev_runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=LOOP_AND_PROMPT,
            input={"topic": "history"},
            continue_as_new_after_events=100,
        ),
        id=workflow_id,
        task_queue=dev_runner.task_queue,
        result_type=GraphRunResult,
    )
    latest = dev_runner.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)

    async def looped_and_waiting() -> bool:
        try:
            described = await latest.query(
                DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            return False  # asked the generation that was just handing over
        return described.current_nodes == ["ask"] and described.generation > 1

    await eventually(looped_and_waiting, what="the loop over, the prompt waiting", timeout=60)
    await latest.execute_update(USER_INPUT_UPDATE, UserInput(message="yes"), result_type=SignalAck)
    result = await latest.result()
    assert result.output["answer"] == {"ask_response": "yes"}

    histories = await fetch_generations(
        dev_runner.client, workflow_id, handle.first_execution_run_id or ""
    )
    assert len(histories) == result.generation >= 3
    kinds = [e.event_type for e in histories[0].events]
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert await replay([(f"{workflow_id} run {i}", h) for i, h in enumerate(histories)]) == []
    if RECORD:
        for generation, history in enumerate(histories, start=1):
            save_history(history, HISTORIES, generation)


async def test_a_run_over_generations_with_a_running_workstream_replays(
    dev_runner: GraphRunner,
) -> None:
    """A workstream launched in generation 1 runs on while the run continues as new; it
    is terminated from a later generation, which learns its end from its signal."""
    workflow_id = "long-workstream" if RECORD else f"long-workstream-{uuid.uuid4().hex[:8]}"
    handle = await dev_runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=WORKSTREAM_PROMPT_AND_LOOP,
            input={"topic": "history"},
            continue_as_new_after_events=100,
        ),
        id=workflow_id,
        task_queue=dev_runner.task_queue,
        result_type=GraphRunResult,
    )
    latest = dev_runner.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)

    async def looped_and_waiting() -> bool:
        try:
            described = await latest.query(
                DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            return False  # asked the generation that was just handing over
        return described.current_nodes == ["ask"] and described.generation > 1

    await eventually(looped_and_waiting, what="the loop over, the prompt waiting", timeout=60)
    await latest.execute_update(
        TERMINATE_WORKSTREAM_UPDATE, TerminateWorkstream(launch_id="ws-1"), result_type=TerminateAck
    )

    async def child_ended() -> bool:
        try:
            listed = await latest.query(
                WORKSTREAMS_QUERY, result_type=WorkstreamList, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            return False
        return listed.workstreams[0].state is WorkstreamState.CANCELED

    await eventually(child_ended, what="ws-1 ended", timeout=60)
    await latest.execute_update(USER_INPUT_UPDATE, UserInput(message="yes"), result_type=SignalAck)
    result = await latest.result()
    assert result.generation >= 2

    histories = await fetch_generations(
        dev_runner.client, workflow_id, handle.first_execution_run_id or ""
    )
    assert len(histories) == result.generation
    child = await dev_runner.client.get_workflow_handle(f"{workflow_id}.ws-1").fetch_history()
    signalled = [
        e
        for e in child.events
        if e.event_type == EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED
    ]
    assert signalled  # WorkstreamEnded, to the parent's workflow id
    named = [(f"{workflow_id} run {i}", h) for i, h in enumerate(histories)]
    assert await replay([*named, (f"{workflow_id}.ws-1", child)]) == []
    if RECORD:
        for generation, history in enumerate(histories, start=1):
            save_history(history, HISTORIES, generation)
        save_history(child, HISTORIES)


def _held(runner: GraphRunner, settings: Settings, activity_name: str) -> HeldActivity:
    if activity_name == POST_MESSAGE:  # the WARNING of the refused loop-back
        warning = int(M.WARNING)
        return HeldActivity(runner, settings, POST_MESSAGE, RunNotice, lambda n: n.type == warning)
    return HeldActivity(runner, settings, RECORD_RUN_START, RunStart, lambda start: True)


def _start(activity_name: str, workflow_id: str) -> Callable[[GraphRunner], Awaitable[Any]]:
    """How the run is started that a cancel meets inside ``activity_name``."""

    async def start(held_runner: GraphRunner) -> WorkflowHandle[Any, Any]:
        if activity_name == POST_MESSAGE:
            return await held_runner.start(LOOP_ONCE, {}, workflow_id=workflow_id)
        return await held_runner.client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=load_example("pipeline"), input={"text": "hi"}, scheduled_by="s"),
            id=workflow_id,
            task_queue=held_runner.task_queue,
        )

    return start


@pytest.mark.parametrize(
    ("stem", "activity_name"),
    [("canceled-in-a-notice", POST_MESSAGE), ("canceled-recording-its-start", RECORD_RUN_START)],
)
async def test_a_run_canceled_inside_its_own_activity_replays(
    dev_runner: GraphRunner, settings: Settings, stem: str, activity_name: str
) -> None:
    """The cancel path behind ``CANCEL_IN_ACTIVITY_PATCH``: its marker is recorded, and
    the history replays."""
    workflow_id = stem if RECORD else f"{stem}-{uuid.uuid4().hex[:8]}"
    held = _held(dev_runner, settings, activity_name)
    handle = await cancel_while_held(held, _start(activity_name, workflow_id))
    history = await handle.fetch_history()
    markers = [e for e in history.events if e.HasField("marker_recorded_event_attributes")]
    assert any(CANCEL_IN_ACTIVITY_PATCH.encode() in e.SerializeToString() for e in markers)
    assert history.events[-1].event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED
    assert await replay([(workflow_id, history)]) == []
    if RECORD:
        save_history(history, HISTORIES)


async def test_a_chat_over_generations_replays(dev_runner: GraphRunner, settings: Settings) -> None:
    """An interactive agent that continues as new while idle, messages in every
    generation (``long-chat``, ``long-chat~2``, …): each generation replays."""
    workflow_id = "long-chat" if RECORD else f"long-chat-{uuid.uuid4().hex[:8]}"
    driver, _ = await start_chat(
        dev_runner.client,
        chat_agent_graph(),
        dev_runner.task_queue,
        redis_url=settings.redis_url,
        workflow_id=workflow_id,
        continue_as_new_after_events=100,
    )
    texts = [f"chat message {n}" for n in range(14)]
    try:
        for n, text in enumerate(texts):
            exchange = await driver.say(text, client_message_id=f"c-{n}")
            assert len(exchange.answers) == 1 and quoted(text, exchange.answers[0])
        result = await driver.complete()
    finally:
        await driver.close()
    assert driver.questions == texts
    assert result.generation >= 3

    histories = await fetch_generations(dev_runner.client, workflow_id, driver.first_run_id)
    assert len(histories) == result.generation
    accepted = [
        [e.event_type for e in h.events].count(
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
        )
        for h in histories
    ]
    assert all(accepted[:-1]) and sum(accepted) == len(texts) + 1  # + the COMPLETE
    assert await replay([(f"{workflow_id} run {i}", h) for i, h in enumerate(histories)]) == []
    if RECORD:
        for generation, history in enumerate(histories, start=1):
            save_history(history, HISTORIES, generation)
