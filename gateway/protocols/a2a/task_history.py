"""A task's ``history`` (A2A §3.2.4): the run's conversation as A2A messages.

A Spindle run keeps its conversation in its message stream (Redis, then the
archive: ``streams.history.stored_messages``), so the history is read from
there rather than kept a second time: the run's input as the first user
message, then the main workstream's user answers (QUESTION echoes) as user
messages and its answers, prompts (REQUEST_INPUT) and final words (COMPLETE)
as agent messages, oldest first. Message ids are derived from the task id and
the message's sequence number, so reading twice gives the same ids.

``historyLength`` keeps the newest ``n`` messages; 0 omits the history; unset
means no limit.
"""

from __future__ import annotations

from typing import Any

import orjson
from a2a.helpers import new_data_part, new_text_part
from a2a.types import Message, Part, Role, Task

from spindle.gateway.models import RunDetail
from spindle.gateway.services.callers import Caller
from spindle.gateway.streams.history import stored_messages
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType, CompactMessage

USER_TYPES = frozenset({AgentMessageType.QUESTION})
AGENT_TYPES = frozenset(
    {AgentMessageType.ANSWER, AgentMessageType.REQUEST_INPUT, AgentMessageType.COMPLETE}
)


def _message(task_id: str, message_id: str, role: Role, parts: list[Part]) -> Message:
    return Message(
        message_id=message_id, role=role, parts=parts, task_id=task_id, context_id=task_id
    )


def input_message(task_id: str, run_input: Any) -> Message | None:
    """The run's input as the user message that asked for it (None without input)."""
    if run_input is None:
        return None
    parts: list[Part]
    if isinstance(run_input, str):
        parts = [new_text_part(run_input)]
    elif isinstance(run_input, dict) and len(run_input) == 1:
        # A message's text filled the input's one string field (task_mapping.run_input).
        (value,) = run_input.values()
        parts = [new_text_part(value)] if isinstance(value, str) else [new_data_part(run_input)]
    elif isinstance(run_input, dict):
        parts = [new_data_part(run_input)]
    else:
        parts = [new_text_part(orjson.dumps(run_input).decode())]
    return _message(task_id, f"{task_id}-input", Role.ROLE_USER, parts)


def stream_message(task_id: str, seq: int, message: CompactMessage) -> Message | None:
    """A stored message as a history entry; None for what is not conversation."""
    if message.workstream != MAIN_WORKSTREAM or not message.m:
        return None
    if message.t in USER_TYPES:
        role = Role.ROLE_USER
    elif message.t in AGENT_TYPES:
        role = Role.ROLE_AGENT
    else:
        return None
    return _message(task_id, f"{task_id}-{seq}", role, [new_text_part(message.m)])


async def task_history(call: Caller, detail: RunDetail) -> list[Message]:
    """The run's conversation, oldest first."""
    task_id = detail.workflow_id
    history: list[Message] = []
    first = input_message(task_id, detail.input)
    if first is not None:
        history.append(first)
    stored = await stored_messages(task_id, bus=call.state.bus, archive=call.state.archive)
    for item in stored:
        entry = stream_message(task_id, item.seq, CompactMessage.model_validate_json(item.raw))
        if entry is not None:
            history.append(entry)
    return history


def with_history(task: Task, history: list[Message], length: int | None) -> Task:
    """``task`` carrying the newest ``length`` messages of ``history`` (all when None)."""
    del task.history[:]
    if length is None:
        task.history.extend(history)
    elif length > 0:
        task.history.extend(history[-length:])
    return task


def limit_history(task: Task, length: int | None) -> Task:
    """``task`` with its own history cut to the newest ``length`` messages."""
    return with_history(task, list(task.history), length)
