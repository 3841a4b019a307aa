"""The parent side of workstreams (``GraphRun``): the deadline timeline, steering,
messages, termination and cancellation, on the time-skipping server with a
scripted child (``tests.workflow.workstream_parents``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import Conflict
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
    UserInput,
)
from spindle.shared.contracts.workstreams import (
    GRACE_SECONDS,
    MESSAGE_WORKSTREAM_UPDATE,
    RUN_FINISHING,
    STEER_WORKSTREAM_UPDATE,
    TERMINATE_WORKSTREAM_UPDATE,
    UNKNOWN_WORKSTREAM,
    WORKSTREAM_FINISHED,
    WORKSTREAM_NOT_INTERACTIVE,
    WRAP_UP_TEXT,
    LaunchRequest,
    MessageWorkstream,
    SteerAck,
    SteerCommand,
    SteerRequest,
    SteerWorkstream,
    TerminateAck,
    TerminateWorkstream,
    WorkstreamInfo,
    WorkstreamMessageAck,
    WorkstreamMessageRequest,
    WorkstreamState,
    child_workflow_id,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from tests.workflow.runs import M, cancel_run, eventually, types_of
from tests.workflow.stub_workstream import PARTIAL
from tests.workflow.workstream_parents import (
    HOLD,
    Parents,
    graph,
    parents_with_stub_children,
    refused,
    seconds_after,
    workstream_node,
)

pytestmark = pytest.mark.workflow


# -- the deadline timeline --------------------------------------------------------------


async def test_deadline_timeline_in_order_then_graceful_timeout(parents: Parents) -> None:
    handle = await parents.runner.start(
        graph("deadline", workstream_node("slow research", deadline_seconds=40))
    )

    async def waiting_for_child() -> list[WorkstreamInfo] | None:
        described = await parents.runner.describe(handle)
        listed = await parents.workstreams(handle)
        done = [r.node_id for r in described.node_reports] == ["launch"]
        return listed if done and listed and listed[0].latest_message == PARTIAL else None

    # The graph has ended; the run waits for its child (time stands still until
    # the test awaits the result) and launches nothing more.
    (info,) = await eventually(waiting_for_child, what="graph done, child running")
    assert info.state is WorkstreamState.RUNNING
    assert (await parents.runner.describe(handle)).status is RunStatus.RUNNING
    late = await refused(parents.launch(handle, LaunchRequest(task="too late")))
    assert late.type == RUN_FINISHING

    result = await handle.result()  # 40 s of deadline pass here, skipped
    assert result.status is RunStatus.COMPLETED

    said = [p for p in parents.posts.calls[handle.id] if p.activity_id.startswith("ws.ws-1.")]
    assert [(p.type, p.details.get("pct")) for p in said] == [
        (M.WARNING, 75),
        (M.WARNING, 90),
        (M.SYSTEM, None),
    ]
    offsets = [seconds_after(info.started_at, p.at) for p in said]
    assert offsets == pytest.approx([30, 36, 40], abs=0.5)
    assert said[0].details == {"launch_id": "ws-1", "pct": 75}
    end = said[2]
    assert end.details["state"] == "timeout"
    assert end.details["summary"] == PARTIAL
    assert end.details["forced"] is False
    assert "timed out" in end.text and PARTIAL in end.text

    log = await parents.stub_log(handle.id, "ws-1")
    [(steer_at, steer), (stop_at, stop)] = [(e.at, e.detail) for e in log.events]
    assert steer == {
        "steer_id": "s-1",
        "command": "add_instruction",
        "text": WRAP_UP_TEXT,
        "origin": "deadline",
    }
    assert stop == {"reason": "timeout"}
    assert seconds_after(info.started_at, datetime.fromisoformat(steer_at)) == pytest.approx(
        32, abs=0.5
    )
    assert seconds_after(info.started_at, datetime.fromisoformat(stop_at)) == pytest.approx(
        40, abs=0.5
    )

    (final,) = await parents.workstreams(handle)
    assert final.state is WorkstreamState.TIMEOUT
    assert final.summary == PARTIAL
    assert final.deadline_used_pct == pytest.approx(100, abs=4)
    messages = await parents.runner.messages(handle.id)
    kinds = types_of(messages)
    assert kinds[-1] is M.COMPLETE
    assert kinds.index(M.SYSTEM) < kinds.index(M.COMPLETE)
    assert all("w" not in m for m in messages)  # the parent speaks as main


async def test_a_child_that_ignores_stop_is_cancelled_after_the_grace_period(
    parents: Parents,
) -> None:
    handle = await parents.runner.start(
        graph("stubborn", workstream_node("stubborn crawler", deadline_seconds=30))
    )
    await parents.skip_to_just_before(30 + GRACE_SECONDS)
    (stopping,) = await parents.workstreams(handle)
    assert stopping.state is WorkstreamState.CANCELING  # since its deadline
    result = await parents.result_in_real_time(handle)
    assert result.status is RunStatus.COMPLETED
    (info,) = await parents.workstreams(handle)
    assert info.state is WorkstreamState.TIMEOUT
    assert info.summary == PARTIAL  # its last progress message: the partial result

    said = [p for p in parents.posts.calls[handle.id] if p.activity_id.startswith("ws.ws-1.")]
    assert [p.type for p in said] == [M.WARNING, M.WARNING, M.SYSTEM]
    end = said[-1]
    assert end.details["forced"] is True
    assert end.details["state"] == "timeout"
    # The parent asks Temporal to cancel the child exactly at deadline + grace (its
    # history shows when); the test server delivers such a request 10 s (skipped) later.
    cancel_at = [
        event.event_time.ToDatetime(tzinfo=UTC)
        async for event in handle.fetch_history_events()
        if event.HasField("request_cancel_external_workflow_execution_initiated_event_attributes")
    ]
    assert [seconds_after(info.started_at, at) for at in cancel_at] == [
        pytest.approx(30 + GRACE_SECONDS, abs=0.5)
    ]
    assert seconds_after(info.started_at, end.at) >= 30 + GRACE_SECONDS

    child = parents.client.get_workflow_handle(child_workflow_id(handle.id, "ws-1"))
    assert (await child.describe()).status is WorkflowExecutionStatus.CANCELED
    log = await parents.stub_log(handle.id, "ws-1")
    assert [e.detail for e in log.events if e.kind == "stop"] == [{"reason": "timeout"}]


# -- steer, message, terminate ---------------------------------------------------------


async def test_a_launch_past_the_live_limit_is_refused_and_the_run_goes_on(
    parents: Parents,
) -> None:
    # Issue 15: a run's workstream fan-out had no limit.
    handle = await parents.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=HOLD, max_live_workstreams=2),
        id=f"ws-limit-{uuid.uuid4().hex[:10]}",
        task_queue=parents.runner.task_queue,
        result_type=GraphRunResult,
    )
    await parents.runner.wait_for_prompt(handle, "hold")
    for task in ("slow a", "slow b"):
        await parents.launch(handle, LaunchRequest(task=task, deadline_seconds=600))
    over = await refused(parents.launch(handle, LaunchRequest(task="slow c")))
    assert over.type == Conflict.application_type
    assert "max_live_workstreams" in str(over)
    assert [i.launch_id for i in await parents.workstreams(handle)] == ["ws-1", "ws-2"]
    assert (await parents.runner.describe(handle)).status is RunStatus.PAUSED, "still waiting"

    await handle.execute_update(
        TERMINATE_WORKSTREAM_UPDATE, TerminateWorkstream(launch_id="ws-1"), result_type=TerminateAck
    )

    async def one_ended() -> bool:
        return (await parents.workstreams(handle))[0].state.finished

    await eventually(one_ended, what="ws-1 ends")
    again = await parents.launch(handle, LaunchRequest(task="quick d"))
    assert again.launch_id == "ws-3", "a slot freed by an ended workstream is usable"
    await cancel_run(handle)


async def test_steer_message_and_terminate_updates_and_their_refusals(parents: Parents) -> None:
    handle = await parents.runner.start(HOLD)
    await parents.runner.wait_for_prompt(handle, "hold")
    worker = await parents.launch(handle, LaunchRequest(task="slow survey", deadline_seconds=600))
    chat = await parents.launch(handle, LaunchRequest(task="expert panel", interactive=True))
    assert (worker.launch_id, chat.launch_id) == ("ws-1", "ws-2")
    assert worker.child_workflow_id == f"{handle.id}.ws-1"
    assert worker.deadline_seconds == 600

    def steer(launch_id: str, command: SteerCommand, text: str | None = None) -> Awaitable[Any]:
        request = SteerWorkstream(
            launch_id=launch_id, steer=SteerRequest(command=command, text=text)
        )
        return handle.execute_update(STEER_WORKSTREAM_UPDATE, request, result_type=SteerAck)

    def message(launch_id: str, text: str) -> Awaitable[Any]:
        request = MessageWorkstream(
            launch_id=launch_id, message=WorkstreamMessageRequest(message=text)
        )
        return handle.execute_update(
            MESSAGE_WORKSTREAM_UPDATE, request, result_type=WorkstreamMessageAck
        )

    def terminate(launch_id: str) -> Awaitable[Any]:
        request = TerminateWorkstream(launch_id=launch_id)
        return handle.execute_update(TERMINATE_WORKSTREAM_UPDATE, request, result_type=TerminateAck)

    unknown = await refused(steer("ws-9", SteerCommand.PAUSE_REQUESTED))
    assert unknown.type == UNKNOWN_WORKSTREAM
    assert "ws-9" in unknown.message
    assert (await refused(message("ws-1", "hello"))).type == WORKSTREAM_NOT_INTERACTIVE
    assert (await refused(terminate("ws-7"))).type == UNKNOWN_WORKSTREAM

    ack = await steer("ws-1", SteerCommand.ADD_CONSTRAINT, "only sources after 2020")
    assert (ack.steer_id, ack.launch_id, ack.status) == ("s-1", "ws-1", "queued")
    reply = await message("ws-2", "what do you think?")
    assert (reply.message_id, reply.launch_id) == ("m-1", "ws-2")

    log = await parents.stub_log(handle.id, "ws-1")
    assert [e.detail for e in log.events] == [
        {
            "steer_id": "s-1",
            "command": "add_constraint",
            "text": "only sources after 2020",
            "origin": "user",
        }
    ]

    async def chat_answered() -> WorkstreamInfo | None:
        info = (await parents.workstreams(handle))[1]
        return info if info.iteration == 1 else None

    answered = await eventually(chat_answered, what="the interactive child's progress")
    assert answered.latest_message == "reply to what do you think?"

    stopping = await terminate("ws-1")
    assert stopping.state in (WorkstreamState.CANCELING, WorkstreamState.CANCELED)

    async def terminated() -> WorkstreamInfo | None:
        info = (await parents.workstreams(handle))[0]
        return info if info.state is WorkstreamState.CANCELED else None

    ended = await eventually(terminated, what="ws-1 canceled")
    assert ended.summary == PARTIAL
    finished = await refused(steer("ws-1", SteerCommand.RESUME_REQUESTED))
    assert finished.type == WORKSTREAM_FINISHED
    assert (await refused(terminate("ws-1"))).type == WORKSTREAM_FINISHED

    # The graph ends: the interactive child is stopped, then the run completes.
    await parents.runner.answer(handle, UserInput(message="yes"))
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    listed = await parents.workstreams(handle)
    assert [i.state for i in listed] == [WorkstreamState.CANCELED, WorkstreamState.CANCELED]
    chat_log = await parents.stub_log(handle.id, "ws-2")
    assert [e.detail for e in chat_log.events if e.kind == "stop"] == [
        {"reason": "parent_finished"}
    ]
    ends = {
        p.details["launch_id"]: p.text for p in parents.posts.calls[handle.id] if p.type is M.SYSTEM
    }
    assert "terminated" in ends["ws-1"]
    assert "run ended" in ends["ws-2"]
    kinds = types_of(await parents.runner.messages(handle.id))
    assert kinds[-1] is M.COMPLETE
    assert kinds.count(M.SYSTEM) == 2


# -- cancelling the parent -----------------------------------------------------------------


async def test_cancelling_the_parent_stops_then_cancels_every_child(parents: Parents) -> None:
    handle = await parents.runner.start(HOLD)
    await parents.runner.wait_for_prompt(handle, "hold")
    for task, interactive in (("slow a", False), ("stubborn b", False), ("panel c", True)):
        await parents.launch(handle, LaunchRequest(task=task, interactive=interactive))
    assert await parents.open_workflows(handle.id) == [
        handle.id,
        *(f"{handle.id}.ws-{n}" for n in (1, 2, 3)),
    ]

    await cancel_run(handle)
    await parents.skip_to_just_before(GRACE_SECONDS)
    stopping = await parents.workstreams(handle)
    assert [i.state for i in stopping] == [
        WorkstreamState.CANCELED,  # stopped gracefully at once
        WorkstreamState.CANCELING,  # ignores the stop: cancelled after the grace period
        WorkstreamState.CANCELED,
    ]
    assert (await parents.runner.describe(handle)).status is RunStatus.RUNNING
    with pytest.raises(WorkflowFailureError):
        await parents.result_in_real_time(handle)

    listed = await parents.workstreams(handle)
    assert [i.state for i in listed] == [WorkstreamState.CANCELED] * 3
    for launch_id in ("ws-1", "ws-2", "ws-3"):
        log = await parents.stub_log(handle.id, launch_id)
        assert [e.detail for e in log.events if e.kind == "stop"] == [{"reason": "parent_canceled"}]
    forced = {
        p.details["launch_id"]: p.details["forced"]
        for p in parents.posts.calls[handle.id]
        if p.type is M.SYSTEM
    }
    assert forced == {"ws-1": False, "ws-2": True, "ws-3": False}

    children = [parents.client.get_workflow_handle(f"{handle.id}.ws-{n}") for n in (1, 2, 3)]
    statuses = [(await child.describe()).status for child in children]
    assert WorkflowExecutionStatus.RUNNING not in statuses
    assert statuses[1] is WorkflowExecutionStatus.CANCELED
    assert await parents.open_workflows(handle.id) == []
    kinds = types_of(await parents.runner.messages(handle.id))
    assert kinds[-1] is M.TERMINATED
    assert kinds.count(M.SYSTEM) == 3


async def test_a_message_taken_for_a_child_that_has_just_ended_is_not_lost(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> None:
    """The child ends while no worker runs the parent; a message sent then reaches a
    parent that has not yet seen that end. It is refused (409) or, taken, rejected on
    the stream as the child's, never dropped."""
    env, queue = time_skipping_env, f"wsp-{uuid.uuid4().hex[:10]}"
    # No sticky cache: the next worker gets the run's tasks from the queue at once.
    async with parents_with_stub_children(
        env, worker_settings, run_bus, run_archive, queue, max_cached_workflows=0
    ) as ps:
        handle = await ps.runner.start(HOLD)
        await ps.runner.wait_for_prompt(handle, "hold")
        await ps.launch(handle, LaunchRequest(task="expert panel", interactive=True))
    await env.client.get_workflow_handle(child_workflow_id(handle.id, "ws-1")).terminate()
    request = MessageWorkstream(launch_id="ws-1", message=WorkstreamMessageRequest(message="hi"))
    sent = asyncio.create_task(
        handle.execute_update(MESSAGE_WORKSTREAM_UPDATE, request, result_type=WorkstreamMessageAck)
    )
    async with parents_with_stub_children(
        env, worker_settings, run_bus, run_archive, queue, max_cached_workflows=0
    ) as ps:
        try:
            ack = await sent
        except WorkflowUpdateFailedError as exc:
            assert isinstance(exc.cause, ApplicationError)
            assert exc.cause.type == WORKSTREAM_FINISHED
        else:
            assert ack.message_id == "m-1"

            async def rejected() -> list[dict[str, Any]] | None:
                found = [
                    m
                    for m in await ps.runner.messages(handle.id)
                    if (m.get("d") or {}).get("message_id") == "m-1"
                ]
                return found or None

            [refusal] = await eventually(rejected, what="m-1 rejected on the stream")
            assert refusal["w"] == "ws-1" and refusal["t"] == M.SYSTEM
            assert refusal["d"]["status"] == "rejected"
            assert refusal["m"] == "message m-1 rejected: the workstream has ended"
        # Ended here: a run left open (no worker polls its queue later) would hold
        # up this server's time for the tests after it.
        await handle.terminate()
