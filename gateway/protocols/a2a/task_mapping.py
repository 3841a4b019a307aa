"""Spindle runs as A2A tasks, and A2A messages as run input (seed 003's mapping).

One A2A task is one graph run. Its ``id`` is the run's workflow id (what every
other Spindle route addresses), and so is its ``contextId``: seed 003 maps its
own task id to ``context_id`` and calls the A2A ``id`` the execution instance;
a Spindle run is both at once. ``status.state`` follows the run's status, the
run's output is the ``result`` artifact, its error is ``status.message`` and
its owner is ``metadata.userId``. Every task and event carries
``metadata.protocol = "a2a"`` (seed 003 MUST). Metadata keys are camelCase like
every other A2A JSON member (``rootTaskId``, ``userId``, ``runId``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import InvalidParamsError

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.a2a_output import REPLY_SUFFIX, declared_artifacts, reply_parts
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType, CompactMessage
from spindle.shared.contracts.runs import RunStatus, UserInput

PROTOCOL = "a2a"
RESULT_ARTIFACT = "result"

STATE_BY_STATUS: dict[str, TaskState] = {
    RunStatus.RUNNING: TaskState.TASK_STATE_WORKING,
    RunStatus.PAUSED: TaskState.TASK_STATE_INPUT_REQUIRED,
    RunStatus.COMPLETED: TaskState.TASK_STATE_COMPLETED,
    RunStatus.FAILED: TaskState.TASK_STATE_FAILED,
    RunStatus.TIMED_OUT: TaskState.TASK_STATE_FAILED,
    RunStatus.CANCELED: TaskState.TASK_STATE_CANCELED,
    RunStatus.TERMINATED: TaskState.TASK_STATE_CANCELED,
}
TERMINAL_STATES = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# A stream (and a blocking send) ends at these: the client acts next.
STOPPING_STATES = TERMINAL_STATES | {
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}
# Progress notes worth a status update; streaming chunks are too fine-grained.
PROGRESS_TYPES = frozenset(
    {
        AgentMessageType.THOUGHT,
        AgentMessageType.PLAN,
        AgentMessageType.UPDATE,
        AgentMessageType.WARNING,
        AgentMessageType.ERROR,
        AgentMessageType.ANSWER,
        AgentMessageType.QUESTION,
        AgentMessageType.BATCH_PROGRESS,
    }
)


def agent_message(
    task_id: str, text: str, data: Any = None, *, message_id: str | None = None
) -> Message:
    """An agent message of the task: the text, and the data when there is some.

    Args:
        message_id: a stable id for a message read again (a task's status), so
            two reads of an unchanged task are equal; else a fresh one.
    """
    parts = [new_text_part(text)]
    if isinstance(data, dict) and data:
        parts.append(new_data_part(data))
    return Message(
        message_id=message_id or uuid.uuid4().hex,
        role=Role.ROLE_AGENT,
        parts=parts,
        task_id=task_id,
        context_id=task_id,
    )


def task_metadata(task_id: str, user_id: str | None, graph: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"protocol": PROTOCOL, "rootTaskId": task_id}
    if user_id:
        meta["userId"] = user_id
    if graph:
        meta["graph"] = graph
    return meta


def result_artifact(output: Any) -> Artifact:
    """The run's output as the task's ``result`` artifact (data, or text)."""
    part: Part
    if isinstance(output, dict | list):
        part = new_data_part(output)
    else:
        part = new_text_part("" if output is None else str(output))
    return Artifact(artifact_id=RESULT_ARTIFACT, name=RESULT_ARTIFACT, parts=[part])


def output_artifacts(output: Any) -> list[Artifact]:
    """The task's artifacts for a run's ``output`` (``a2a_output``: declared
    artifacts, a message's parts as ``result``, else the output as ``result``)."""
    declared = declared_artifacts(output)
    if declared is not None:
        return declared
    parts = reply_parts(output)
    if parts is not None:
        return [Artifact(artifact_id=RESULT_ARTIFACT, name=RESULT_ARTIFACT, parts=parts)]
    return [result_artifact(output)]


def reply_message(task_id: str, output: Any) -> Message | None:
    """The agent's reply when the run's output is shaped like a message (``a2a_output``)."""
    parts = reply_parts(output)
    if parts is None:
        return None
    return Message(
        message_id=f"{task_id}-{REPLY_SUFFIX}",
        role=Role.ROLE_AGENT,
        parts=parts,
        task_id=task_id,
        context_id=task_id,
    )


def is_reply(task: Task) -> bool:
    """Whether a completed task's status message is a message-shaped output's reply."""
    return task.status.HasField("message") and task.status.message.message_id == (
        f"{task.id}-{REPLY_SUFFIX}"
    )


def task_from_run(detail: RunDetail, user_id: str | None = None) -> Task:
    """The A2A task of a described run."""
    task_id = detail.workflow_id
    state = STATE_BY_STATUS.get(detail.status, TaskState.TASK_STATE_WORKING)
    status = TaskStatus(state=state)
    if state == TaskState.TASK_STATE_INPUT_REQUIRED and detail.pending_input is not None:
        pending = detail.pending_input
        status.message.CopyFrom(
            agent_message(
                task_id,
                pending.prompt,
                {"node_id": pending.node_id, "ui_schema": pending.ui_schema},
                message_id=f"{task_id}-prompt-{pending.node_id}-{pending.requested_at}",
            )
        )
    elif state == TaskState.TASK_STATE_FAILED:
        status.message.CopyFrom(
            agent_message(task_id, detail.error or "the run failed", message_id=f"{task_id}-failed")
        )
    if state == TaskState.TASK_STATE_COMPLETED:
        reply = reply_message(task_id, detail.output)
        if reply is not None:
            status.message.CopyFrom(reply)
    task = Task(id=task_id, context_id=task_id, status=status)
    if state == TaskState.TASK_STATE_COMPLETED:
        task.artifacts.extend(output_artifacts(detail.output))
    task.metadata.update(task_metadata(task_id, user_id, detail.graph_name))
    if detail.run_id:
        task.metadata.update({"runId": detail.run_id})
    return task


def status_event(task_id: str, state: TaskState, message: Message | None) -> TaskStatusUpdateEvent:
    event = TaskStatusUpdateEvent(
        task_id=task_id, context_id=task_id, status=TaskStatus(state=state)
    )
    if message is not None:
        event.status.message.CopyFrom(message)
    event.metadata.update({"protocol": PROTOCOL, "rootTaskId": task_id})
    return event


def artifact_events(task_id: str, output: Any) -> list[TaskArtifactUpdateEvent]:
    """One event per artifact of the run's output (``output_artifacts``)."""
    events = []
    for artifact in output_artifacts(output):
        event = TaskArtifactUpdateEvent(
            task_id=task_id, context_id=task_id, artifact=artifact, last_chunk=True
        )
        event.metadata.update({"protocol": PROTOCOL, "rootTaskId": task_id})
        events.append(event)
    return events


def progress_event(task_id: str, message: CompactMessage) -> TaskStatusUpdateEvent | None:
    """A ``working`` update for a progress message; None for what is not shown."""
    if message.t not in PROGRESS_TYPES or not message.m:
        return None
    data = message.d if isinstance(message.d, dict) else None
    if message.workstream != MAIN_WORKSTREAM:
        data = {**(data or {}), "workstream": message.workstream}
    return status_event(
        task_id, TaskState.TASK_STATE_WORKING, agent_message(task_id, message.m, data)
    )


def input_required_event(task_id: str, message: CompactMessage) -> TaskStatusUpdateEvent:
    details = message.d if isinstance(message.d, dict) else {}
    data = {k: details[k] for k in ("node_id", "ui_schema") if k in details}
    text = message.m or str(details.get("prompt") or "input required")
    return status_event(
        task_id, TaskState.TASK_STATE_INPUT_REQUIRED, agent_message(task_id, text, data)
    )


def asks_for_input(message: CompactMessage) -> bool:
    return message.t == AgentMessageType.REQUEST_INPUT and message.workstream == MAIN_WORKSTREAM


def waits_for_user(message: CompactMessage) -> bool:
    """The main IDLE of an interactive agent that answered and waits for the next user
    message (``waiting_for`` empty: no child it awaits), docs/conversations.md."""
    if message.t != AgentMessageType.IDLE or message.workstream != MAIN_WORKSTREAM:
        return False
    details = message.d if isinstance(message.d, dict) else {}
    return not details.get("waiting_for")


def idle_event(task_id: str, message: CompactMessage, answer: str | None) -> TaskStatusUpdateEvent:
    """``input-required`` for an agent waiting for the user: its answer as the status
    message (else the IDLE's own text), ``{"node_id", "awaiting": "message"}`` as data."""
    details = message.d if isinstance(message.d, dict) else {}
    data = {"node_id": details.get("node_id"), "awaiting": "message"}
    text = answer or message.m or "waiting for your message"
    return status_event(
        task_id, TaskState.TASK_STATE_INPUT_REQUIRED, agent_message(task_id, text, data)
    )


@dataclass
class WaitScan:
    """What reading a run's messages back from the last one found (``scan_wait``)."""

    decided: bool = False
    """The read reached its answer before the first message it was given (False: an
    earlier message may still change it; read further back, if the stream has more)."""
    waiting: bool = True
    """False: the run is not in a user wait the stream shows (yet)."""
    idle: tuple[int, CompactMessage] | None = None
    """The wait's IDLE and its seq."""
    answer: str | None = None
    """The agent's last answer before its IDLE."""


def scan_wait(kept: Sequence[StoredMessage], agents: Sequence[str]) -> WaitScan:
    """Read ``kept`` back from its last message for the wait ``agents`` are in.

    Skips the other workstreams' messages (a child may post any number while the
    agent waits) and the main ones a wait lets pass (an upload's SYSTEM, a WARNING):
    the wait's IDLE is the agent's last post, its answer the last main ANSWER before
    it. An ANSWER or QUESTION after the last IDLE means this wait's IDLE is not posted
    yet (it goes out just after the wait begins): not waiting until it is.
    """
    scan = WaitScan(waiting=bool(agents), decided=not agents)
    for item in reversed(kept if agents else ()):
        message = CompactMessage.model_validate_json(item.raw)
        if message.workstream != MAIN_WORKSTREAM:
            continue
        if scan.idle is None:
            if message.t in (AgentMessageType.ANSWER, AgentMessageType.QUESTION):
                return WaitScan(decided=True, waiting=False)
            if waits_for_user(message):
                details = message.d if isinstance(message.d, dict) else {}
                if details.get("node_id") not in agents:
                    return WaitScan(decided=True, waiting=False)
                scan.idle = (item.seq, message)
            continue
        if waits_for_user(message):
            scan.decided = True  # an earlier wait: the agent answered nothing since
            return scan
        if message.t == AgentMessageType.ANSWER and message.m:
            scan.answer, scan.decided = message.m, True
            return scan
    return scan


def wait_event(task_id: str, scan: WaitScan, agents: Sequence[str]) -> TaskStatusUpdateEvent | None:
    """The ``input-required`` update of the wait ``scan`` found (``agents``: the agents
    waiting for a user message, from the ``describe`` query), else None.

    A scan that reached the start of what it read without the IDLE (a stream trimmed
    past it) gives the IDLE's default text. The status message id is
    ``<task_id>-idle-<seq of the IDLE>``: two reads of an unchanged task are equal, and
    a newer wait has another id.
    """
    if not scan.waiting or not agents:
        return None
    if scan.idle is None:
        idle = CompactMessage(t=AgentMessageType.IDLE, d={"node_id": agents[0]})
        found = idle_event(task_id, idle, None)
        found.status.message.message_id = f"{task_id}-idle"
        return found
    seq, message = scan.idle
    found = idle_event(task_id, message, scan.answer)
    found.status.message.message_id = f"{task_id}-idle-{seq}"
    return found


def status_text(event: TaskStatusUpdateEvent) -> str:
    """The text of a status update's message."""
    return "\n".join(t for t in get_text_parts(event.status.message.parts) if t)


class IdleWatch:
    """Turns an interactive agent's IDLE into ``input-required`` with its last answer.

    Fed every message of the run in order. After a follow-up message was sent
    (``after_send``), an IDLE before any other main message is the agent's wait
    from before that message and is not taken for its answer to it.
    """

    def __init__(self, *, after_send: bool = False) -> None:
        self._answer: str | None = None
        self._armed = not after_send

    def event(self, task_id: str, message: CompactMessage) -> TaskStatusUpdateEvent | None:
        """The ``input-required`` update when ``message`` says the agent waits for the user."""
        if message.workstream != MAIN_WORKSTREAM:
            return None
        if message.t != AgentMessageType.IDLE:
            self._armed = True
            if message.t == AgentMessageType.ANSWER and message.m:
                self._answer = message.m
            return None
        if not self._armed or not waits_for_user(message):
            return None
        answer, self._answer = self._answer, None
        return idle_event(task_id, message, answer)


def require_message(params: SendMessageRequest) -> None:
    """Refuse a send without a message, or a message without parts or ``messageId``
    (A2A 1.0 §4.1.4: both required), before anything starts (TCK CORE-ERR-002).

    Raises:
        InvalidParamsError: naming the missing field.
    """
    if not params.HasField("message"):
        field = "message"
    elif not params.message.parts:
        field = "message.parts"
    elif not params.message.message_id:
        field = "message.messageId"
    else:
        return
    raise InvalidParamsError(
        message=f"{field} is required", data={"field": field, "reason": "required"}
    )


def message_text(message: Message) -> str:
    return "\n".join(t for t in get_text_parts(message.parts) if t)


def message_data(message: Message) -> dict[str, Any] | None:
    """The first object among the message's data parts (merged when several)."""
    merged: dict[str, Any] = {}
    for data in get_data_parts(message.parts):
        if isinstance(data, dict):
            merged.update(data)
    return merged or None


def run_input(message: Message, input_schema: dict[str, Any] | None) -> Any:
    """The run input a message stands for.

    A data part is the input as is. Text fills the input schema's single
    required string property (research-agent's ``question``, approval-flow's
    ``topic``); without such a property the text is the input itself.
    """
    data = message_data(message)
    if data is not None:
        return _integral(data)
    text = message_text(message)
    field = single_required_string(input_schema)
    if field is not None:
        return {field: text}
    return text


def single_required_string(schema: dict[str, Any] | None) -> str | None:
    if not isinstance(schema, dict):
        return None
    required = schema.get("required") or []
    properties = schema.get("properties") or {}
    if not isinstance(required, list) or not isinstance(properties, dict):
        return None
    strings = [
        name
        for name in required
        if isinstance(properties.get(name), dict) and properties[name].get("type") == "string"
    ]
    return strings[0] if len(strings) == 1 else None


def user_answer(message: Message) -> UserInput:
    """A follow-up message as the run's ``UserInput``: data answers, text is the message."""
    data = message_data(message)
    text = message_text(message)
    return UserInput(
        message=text or None,
        data=_integral(data) if data is not None else None,
        client_message_id=message.message_id or None,
    )


def _integral(value: Any) -> Any:
    """Protobuf ``Value`` turned every number into a float: give whole ones back as int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value
