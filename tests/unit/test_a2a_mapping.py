"""Seed 003's task mapping between Spindle runs and A2A tasks (protocols.a2a.task_mapping)."""

from __future__ import annotations

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import Message, Role, TaskState, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.task_mapping import (
    IdleWatch,
    run_input,
    scan_wait,
    task_from_run,
    user_answer,
    wait_event,
)
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.contracts.runs import PendingInput


def _read(kept: list[StoredMessage], agents: list[str]) -> TaskStatusUpdateEvent | None:
    """What a task read finds in ``kept`` (``idle_wait`` over one page that is all)."""
    return wait_event("t1", scan_wait(kept, agents), agents)


APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"topic": {"type": "string"}, "audience": {"type": "string"}},
    "required": ["topic"],
}


def message(*parts: object) -> Message:
    built = [new_text_part(p) if isinstance(p, str) else new_data_part(p) for p in parts]
    return Message(message_id="m", role=Role.ROLE_USER, parts=built)


def test_text_fills_the_single_required_string_of_the_input_schema() -> None:
    assert run_input(message("Q3 budget"), APPROVAL_SCHEMA) == {"topic": "Q3 budget"}


def test_text_is_the_input_when_no_single_required_string() -> None:
    two = {**APPROVAL_SCHEMA, "required": ["topic", "audience"]}
    assert run_input(message("hello"), two) == "hello"
    assert run_input(message("hello"), None) == "hello"


def test_a_data_part_is_the_input_with_whole_numbers_kept_whole() -> None:
    got = run_input(message({"topic": "x", "points": 3, "ratio": 0.5}), APPROVAL_SCHEMA)
    assert got == {"topic": "x", "points": 3, "ratio": 0.5}
    assert isinstance(got["points"], int)


def test_a_follow_up_is_a_user_input_answer() -> None:
    answer = user_answer(message("looks good", {"decision": "approve"}))
    assert answer.message == "looks good"
    assert answer.data == {"decision": "approve"}
    assert answer.client_message_id == "m"


def test_run_states_map_to_task_states() -> None:
    cases = {
        "running": TaskState.TASK_STATE_WORKING,
        "paused": TaskState.TASK_STATE_INPUT_REQUIRED,
        "completed": TaskState.TASK_STATE_COMPLETED,
        "failed": TaskState.TASK_STATE_FAILED,
        "timed_out": TaskState.TASK_STATE_FAILED,
        "canceled": TaskState.TASK_STATE_CANCELED,
        "terminated": TaskState.TASK_STATE_CANCELED,
    }
    for status, state in cases.items():
        task = task_from_run(RunDetail(workflow_id="run-1", status=status))
        assert task.status.state == state, status
        assert task.id == task.context_id == "run-1"
        assert MessageToDict(task.metadata)["protocol"] == "a2a"


def test_completed_output_is_the_result_artifact_and_error_the_status_message() -> None:
    done = task_from_run(
        RunDetail(workflow_id="run-1", status="completed", output={"n": 2}), user_id="alice"
    )
    [artifact] = done.artifacts
    assert artifact.name == "result" and get_data_parts(artifact.parts) == [{"n": 2.0}]
    assert MessageToDict(done.metadata)["userId"] == "alice"

    failed = task_from_run(RunDetail(workflow_id="run-2", status="failed", error="boom"))
    assert get_text_parts(failed.status.message.parts) == ["boom"]
    assert not failed.artifacts


def test_a_waiting_run_shows_its_prompt() -> None:
    pending = PendingInput(
        node_id="review", prompt="Approve?", ui_schema={"type": "object"}, requested_at="t"
    )
    task = task_from_run(RunDetail(workflow_id="run-3", status="paused", pending_input=pending))
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_text_parts(task.status.message.parts) == ["Approve?"]
    assert get_data_parts(task.status.message.parts)[0]["node_id"] == "review"


def _message(
    kind: AgentMessageType,
    text: str,
    details: dict[str, object] | None = None,
    w: str | None = None,
) -> CompactMessage:
    return CompactMessage(t=kind, m=text, d=details, w=w, ts=1)


def test_an_agent_waiting_for_the_user_is_input_required_with_its_last_answer() -> None:
    watch = IdleWatch()
    seen = [
        watch.event("t1", _message(AgentMessageType.ANSWER, "first answer", {"node_id": "a"})),
        watch.event(
            "t1",
            _message(
                AgentMessageType.IDLE, "waiting for ws-1", {"node_id": "a", "waiting_for": ["ws-1"]}
            ),
        ),
        watch.event("t1", _message(AgentMessageType.ANSWER, "from the child", {}, w="ws-1")),
        watch.event("t1", _message(AgentMessageType.ANSWER, "final answer", {"node_id": "a"})),
    ]
    assert seen == [None, None, None, None]  # waiting for a child is not waiting for the user
    event = watch.event(
        "t1",
        _message(
            AgentMessageType.IDLE, "waiting for your message", {"node_id": "a", "waiting_for": []}
        ),
    )
    assert event is not None and event.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_text_parts(event.status.message.parts) == ["final answer"]
    assert get_data_parts(event.status.message.parts) == [{"node_id": "a", "awaiting": "message"}]


def test_after_a_follow_up_an_idle_from_before_it_is_not_its_answer() -> None:
    watch = IdleWatch(after_send=True)
    idle = _message(
        AgentMessageType.IDLE, "waiting for your message", {"node_id": "a", "waiting_for": []}
    )
    assert watch.event("t1", idle) is None
    assert (
        watch.event("t1", _message(AgentMessageType.QUESTION, "and 2 + 3", {"node_id": "a"}))
        is None
    )
    assert watch.event("t1", _message(AgentMessageType.ANSWER, "5", {"node_id": "a"})) is None
    event = watch.event("t1", idle)
    assert event is not None and get_text_parts(event.status.message.parts) == ["5"]


def _kept(*messages: CompactMessage) -> list[StoredMessage]:
    """The messages as the stream keeps them, seq 1, 2, …"""
    return [
        StoredMessage(seq, 1, m.model_dump_json(exclude_none=True).encode())
        for seq, m in enumerate(messages, start=1)
    ]


WAITS = {"node_id": "a", "waiting_for": []}


def test_the_wait_is_found_behind_any_number_of_other_workstreams_messages() -> None:
    children = [_message(AgentMessageType.UPDATE, f"step {k}", {}, w="ws-1") for k in range(500)]
    kept = _kept(
        _message(AgentMessageType.ANSWER, "the answer", {"node_id": "a"}),
        _message(AgentMessageType.IDLE, "waiting for your message", WAITS),
        _message(AgentMessageType.SYSTEM, "file uploaded: a.txt", {}),  # a wait lets it pass
        *children,
    )
    event = _read(kept, ["a"])
    assert event is not None and event.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_text_parts(event.status.message.parts) == ["the answer"]
    assert event.status.message.message_id == "t1-idle-2"  # the IDLE's seq: stable
    assert _read(kept, []) is None  # the run says no agent waits


def test_a_wait_whose_idle_is_not_posted_yet_or_another_agents_is_not_shown() -> None:
    earlier = [
        _message(AgentMessageType.ANSWER, "first", {"node_id": "a"}),
        _message(AgentMessageType.IDLE, "waiting for your message", WAITS),
        _message(AgentMessageType.QUESTION, "and then?", {"node_id": "a"}),
        _message(AgentMessageType.ANSWER, "second", {"node_id": "a"}),
    ]
    assert _read(_kept(*earlier), ["a"]) is None  # the new IDLE comes next
    assert _read(_kept(*earlier[:2]), ["b"]) is None


def test_a_wait_trimmed_from_the_stream_still_reads_input_required() -> None:
    kept = _kept(*[_message(AgentMessageType.UPDATE, "x", {}, w="ws-1") for _ in range(3)])
    event = _read(kept, ["a"])
    assert event is not None and event.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert get_data_parts(event.status.message.parts) == [{"node_id": "a", "awaiting": "message"}]
    assert event.status.message.message_id == "t1-idle"
