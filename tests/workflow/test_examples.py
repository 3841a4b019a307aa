"""Each example graph end to end on the time-skipping server, with the real activities.

What a user checks: the run's result, the node reports, and the messages a client
watching the run's stream receives, in order.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.contracts.runs import NodeStatus, RunStatus, UserInput
from spindle.worker.examples import load_example
from tests.polling import eventually
from tests.workflow.runs import GraphRunner, M, cancel_run, is_subsequence, types_of

pytestmark = pytest.mark.workflow


def report_status(result_reports: list, node_id: str) -> NodeStatus:
    return next(r.status for r in result_reports if r.node_id == node_id)


async def test_pipeline_escalates_a_negative_message(runner: GraphRunner) -> None:
    handle = await runner.start(
        load_example("pipeline"),
        {"text": "The export is broken and slow, another bug. I want a refund."},
        meta={"source": "support-inbox"},
    )
    result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert result.output["priority"] == "high"
    assert result.output["mood"] == "negative"
    # Metadata given at start and added by each tool node reached the output node.
    assert result.output["source"] == "support-inbox"
    assert result.output["tools"] == ["extract_keywords", "sentiment"]
    assert report_status(result.node_reports, "escalation") is NodeStatus.SUCCESS
    assert report_status(result.node_reports, "summary") is NodeStatus.SKIPPED

    messages = await runner.messages(handle.id)
    assert types_of(messages) == [M.UPDATE, M.UPDATE, M.UPDATE, M.UPDATE, M.ANSWER, M.COMPLETE]
    assert [m["i"] for m in messages] == [
        "keywords.1",
        "keywords.1",
        "mood.1",
        "mood.1",
        "escalation.1",
        "finish",
    ]
    assert messages[-2]["m"].startswith("Escalate: negative message about ")
    assert messages[-1]["d"] == {"status": "completed"}


async def test_pipeline_summarises_a_routine_message(runner: GraphRunner) -> None:
    handle = await runner.start(
        load_example("pipeline"), {"text": "Thanks, the new release is great and fast."}
    )
    result = await handle.result()
    assert result.output["priority"] == "normal"
    assert result.output["mood"] == "positive"
    assert report_status(result.node_reports, "escalation") is NodeStatus.SKIPPED
    messages = await runner.messages(handle.id)
    assert messages[-2]["t"] == M.ANSWER
    assert messages[-2]["m"].startswith("Routine positive message about ")


async def test_research_agent_uses_its_tools_then_answers(runner: GraphRunner) -> None:
    handle = await runner.start(
        load_example("research-agent"), {"question": "What is Temporal? And what is 17 * 3?"}
    )
    result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert "17 * 3 = 51" in result.output
    assert "durable execution" in result.output
    assert [r.node_id for r in result.node_reports] == ["researcher", "answer"]

    everything = await runner.messages(handle.id)
    # Its two tool calls ran as one batch: each posted where the batch stands.
    assert sorted(m["m"] for m in everything if m["t"] == M.BATCH_PROGRESS) == [
        "tool 1 of 2 (search_notes) done",
        "tool 2 of 2 (calculator) done",
    ]
    messages = [m for m in everything if m["t"] != M.BATCH_PROGRESS]
    # The agent answers once; the output node (no message template) adds nothing.
    assert types_of(messages) == [M.THOUGHT, M.UPDATE, M.UPDATE, M.ANSWER, M.COMPLETE]
    # One activity per LLM turn and one per tool call, with readable ids.
    assert messages[0]["i"] == "researcher.1.t1"
    assert sorted(m["i"] for m in messages[1:3]) == [
        "researcher.1.t1.call_1_search_notes",
        "researcher.1.t1.call_2_calculator",
    ]
    assert messages[3]["i"] == "researcher.1.t2"
    assert messages[3]["m"] == result.output


async def test_approval_flow_waits_for_a_valid_answer(runner: GraphRunner) -> None:
    handle = await runner.start(load_example("approval-flow"), {"topic": "durable runs"})

    described = await runner.wait_for_prompt(handle, "review")
    assert described.status is RunStatus.PAUSED
    assert described.current_nodes == ["review"]
    pending = described.pending_input
    assert pending is not None
    assert pending.prompt == "Approve or reject the draft, with an optional comment."
    assert pending.ui_schema["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert pending.ui_schema["required"] == ["decision"]

    # An answer outside the enum is refused, naming the field and the rule ...
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await runner.answer(handle, UserInput(message="maybe later"))
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError)
    assert cause.type == "InputInvalid"
    assert "decision" in cause.message
    assert cause.details[0]["errors"][0]["field"] == "decision"
    assert cause.details[0]["errors"][0]["rule"] == "enum"

    # ... so is one for a prompt the run is not waiting on ...
    with pytest.raises(WorkflowUpdateFailedError) as not_waiting:
        await runner.answer(handle, UserInput(message="approve", node_id="publish"))
    assert isinstance(not_waiting.value.cause, ApplicationError)
    assert not_waiting.value.cause.type == "NotWaiting"

    # ... and the run keeps waiting, having posted nothing for them.
    still = await runner.describe(handle)
    assert still.pending_input is not None and still.pending_input.node_id == "review"
    assert M.QUESTION not in types_of(await runner.messages(handle.id))

    ack = await runner.answer(
        handle,
        UserInput(
            data={"decision": "reject", "comment": "durable runs need tests"},
            client_message_id="c-1",
        ),
    )
    assert ack.status == "accepted"
    result = await handle.result()

    assert result.output["decision"] == "reject"
    assert result.output["comment"] == "durable runs need tests"
    statuses = {r.node_id: r.status for r in result.node_reports}
    assert statuses["revise"] is NodeStatus.SUCCESS
    assert statuses["publish"] is NodeStatus.SKIPPED

    messages = await runner.messages(handle.id)
    kinds = types_of(messages)
    assert is_subsequence(
        [M.UPDATE, M.REQUEST_INPUT, M.QUESTION, M.UPDATE, M.ANSWER, M.COMPLETE], kinds
    )
    assert kinds.count(M.REQUEST_INPUT) == 1 and kinds.count(M.QUESTION) == 1
    question = messages[kinds.index(M.QUESTION)]
    assert question["i"] == "review.1.answer"
    assert question["d"]["client_message_id"] == "c-1"
    ask = messages[kinds.index(M.REQUEST_INPUT)]
    assert ask["i"] == "review.1.ask"
    assert ask["d"]["ui_schema"] == pending.ui_schema
    assert kinds[-1] == M.COMPLETE


async def test_approval_by_plain_message_takes_the_approved_branch(runner: GraphRunner) -> None:
    handle = await runner.start(load_example("approval-flow"), {"topic": "release notes"})
    await runner.wait_for_prompt(handle, "review")
    await runner.answer(handle, UserInput(message="approve"))
    result = await handle.result()
    assert result.output["decision"] == "approve"
    assert result.output["stats"]["words"] > 0
    question = next(m for m in await runner.messages(handle.id) if m["t"] == M.QUESTION)
    assert question["m"] == "approve"


async def canceled_result(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any]) -> None:
    """Cancel the run and wait for its end in wall time.

    The cancel waits for the in-flight ``request_input`` (a real activity running in
    wall time); with time skipping on, the test server jumps over it to the
    workflow's own timeouts, so the wait runs with skipping off.
    """
    await cancel_run(handle)
    with env.auto_time_skipping_disabled():
        await handle.result()


async def activity_completed(handle: WorkflowHandle[Any, Any], activity_id: str) -> bool:
    """Whether the run's history has the activity ``activity_id`` completed."""
    scheduled: set[int] = set()
    ended: set[int] = set()
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            scheduled.update([event.event_id] if attrs.activity_id == activity_id else [])
        elif event.HasField("activity_task_completed_event_attributes"):
            ended.add(event.activity_task_completed_event_attributes.scheduled_event_id)
    return bool(scheduled & ended)


async def test_cancel_while_waiting_terminates_the_run(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    handle = await runner.start(load_example("approval-flow"), {"topic": "cancel me"})
    await runner.wait_for_prompt(handle, "review")

    async def asked() -> bool | None:
        # Waiting means the ask is over: its activity has ended. (A cancel that meets
        # the ask in flight is the next test's case; on the time-skipping server it
        # can race the ask's end, ACTIVITY_UNKNOWN, and the run never ends.)
        return True if await activity_completed(handle, "review.1.ask") else None

    await eventually(asked, what="the prompt asked")
    with pytest.raises(WorkflowFailureError) as failure:
        await canceled_result(time_skipping_env, handle)
    assert isinstance(failure.value.cause, CancelledError)
    assert (await handle.describe()).status is WorkflowExecutionStatus.CANCELED

    messages = await runner.messages(handle.id)
    assert messages[-1]["t"] == M.TERMINATED
    assert messages[-1]["d"]["status"] == "canceled"
    # Cancelled through the Temporal client: the operator is named (docs/protocols/outbound.md).
    assert messages[-1]["d"]["ended_by"]["kind"] == "operator"
    assert M.COMPLETE not in types_of(messages)
    described = await runner.describe(handle)
    assert described.status is RunStatus.CANCELED
    assert described.pending_input is None
