"""Recorded histories replay against the current workflows; drift is detected."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import ParentClosePolicy
from temporalio.client import WorkflowHistory

from spindle.shared.contracts.conversations import (
    CANCEL_QUEUED_RUN_UPDATE,
    CONVERSATION_WORKFLOW,
    SUBMIT_RUN_UPDATE,
)
from spindle.shared.contracts.runs import USER_MESSAGE_UPDATE
from spindle.worker.main import workflow_classes
from spindle.worker.replay.histories import load_history
from spindle.worker.replay.replayer import main as replay_main
from spindle.worker.replay.replayer import replay_histories
from tests.replay.drifted import DriftedGraphRun

pytestmark = pytest.mark.workflow

HISTORIES = Path(__file__).parent.parent / "histories"
EXAMPLES = ("approval-flow", "delegation", "pipeline", "research-agent", "review-triage")


def history_files() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def test_every_example_has_a_recorded_history() -> None:
    stems = {p.stem for p in history_files()}
    assert stems >= {*EXAMPLES, "delegation.ws-1"}
    # A run that continued as new: one history per generation, <id>~<generation>.
    assert stems >= {"long-loop", "long-loop~2", "long-loop~3"}
    # ... and one whose workstream ran across generations, with the child's history.
    assert stems >= {"long-workstream", "long-workstream~2", "long-workstream.ws-1"}
    # ... and a chat with an interactive agent that continued as new while idle.
    assert stems >= {"long-chat", "long-chat~2", "long-chat~3"}
    # ... and runs canceled inside an activity of their own (CANCEL_IN_ACTIVITY_PATCH).
    assert stems >= {"canceled-in-a-notice", "canceled-recording-its-start"}
    for path in history_files():
        assert load_history(path).workflow_id == path.stem.split("~")[0]


def workflow_type(history: WorkflowHistory) -> str:
    return history.events[0].workflow_execution_started_event_attributes.workflow_type.name


def accepted_updates(history: WorkflowHistory) -> list[str]:
    return [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
        for e in history.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]


def test_every_workflow_the_worker_runs_has_a_recorded_history() -> None:
    # A workflow class added to the worker without a history here would have no
    # determinism check: record one (tests/histories/record.py).
    recorded = {workflow_type(load_history(path)) for path in history_files()}
    runs = {workflow._Definition.must_from_class(cls).name for cls in workflow_classes()}
    assert runs - recorded == set()


def test_the_recorded_conversation_queues_runs_and_takes_one_out() -> None:
    history = load_history(HISTORIES / "conversation.json")
    assert workflow_type(history) == CONVERSATION_WORKFLOW
    assert accepted_updates(history) == [SUBMIT_RUN_UPDATE] * 3 + [CANCEL_QUEUED_RUN_UPDATE]
    children = [
        e
        for e in history.events
        if e.HasField("child_workflow_execution_completed_event_attributes")
    ]
    assert len(children) == 2


def test_a_later_generation_starts_from_what_the_previous_one_carried() -> None:
    first, second = (load_history(HISTORIES / f"{n}.json") for n in ("long-loop", "long-loop~2"))
    ended = first.events[-1].workflow_execution_continued_as_new_event_attributes
    started = second.events[0].workflow_execution_started_event_attributes
    assert ended.new_execution_run_id == second.run_id
    assert started.continued_execution_run_id == first.run_id


def test_a_workstream_launched_in_one_generation_reports_its_end_to_a_later_one() -> None:
    first = load_history(HISTORIES / "long-workstream.json")
    later = sorted(HISTORIES.glob("long-workstream~*.json"))

    def signals(history: WorkflowHistory) -> list[str]:
        return [
            e.workflow_execution_signaled_event_attributes.signal_name
            for e in history.events
            if e.HasField("workflow_execution_signaled_event_attributes")
        ]

    started = [
        e.start_child_workflow_execution_initiated_event_attributes
        for e in first.events
        if e.HasField("start_child_workflow_execution_initiated_event_attributes")
    ]
    assert [s.parent_close_policy for s in started] == [
        ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON
    ]
    assert "WorkstreamEnded" not in signals(first)
    assert sum(signals(load_history(p)).count("WorkstreamEnded") for p in later) == 1


def test_the_recorded_chat_takes_user_messages_in_every_generation() -> None:
    chat = sorted(HISTORIES.glob("long-chat*.json"))
    updates = [accepted_updates(load_history(path)) for path in chat]
    assert len(updates) >= 3
    assert all(USER_MESSAGE_UPDATE in names for names in updates)
    ended = load_history(chat[0]).events[-1]
    assert ended.HasField("workflow_execution_continued_as_new_event_attributes")


async def test_recorded_histories_replay_with_the_current_workflow() -> None:
    failures = await replay_histories(history_files())
    assert failures == [], "\n".join(f"{f.source}: {f.error}" for f in failures)


async def test_a_non_deterministic_change_is_detected() -> None:
    failures = await replay_histories([HISTORIES / "pipeline.json"], workflows=[DriftedGraphRun])
    assert len(failures) == 1
    assert failures[0].workflow_id == "pipeline"
    error = failures[0].error
    assert error.startswith("NondeterminismError")
    assert (
        "'execute_node' does not match activity type of activity command 'execute_node_v2'" in error
    )


def test_replay_command_reports_success_for_the_recorded_histories(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [str(p) for p in history_files()]
    assert replay_main(files) == 0
    assert f"{len(files)}/{len(files)} histories replayed" in capsys.readouterr().out
