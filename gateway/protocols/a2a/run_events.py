"""A2A sends as run operations: start a run or answer it, then follow its messages.

Each flow is an async generator of A2A events: first the ``Task`` (working),
then ``working`` status updates for the run's progress messages, until the run
asks for input (an ``input-required`` update) or ends (the ``result`` artifact
and ``completed``, or ``failed`` with the error, or ``canceled``), read from
Temporal and the archive once the workflow closed.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from a2a.server.events import Event
from a2a.types import (
    Message,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError

from spindle.gateway.models import StartRunRequest
from spindle.gateway.protocols.a2a.run_follower import RunFollower
from spindle.gateway.protocols.a2a.spindle_call import (
    authorize,
    describe,
    follower_of,
    wait_closed,
)
from spindle.gateway.protocols.a2a.task_mapping import (
    agent_message,
    artifact_event,
    asks_for_input,
    input_required_event,
    progress_event,
    run_input,
    status_event,
    task_from_run,
    task_metadata,
    user_answer,
)
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_input import RunSignal, signal_run
from spindle.gateway.services.run_starts import admit_start
from spindle.shared.contracts.errors import (
    Conflict,
    NotFound,
    RateLimited,
    SpindleError,
    ValidationFailed,
)
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.contracts.runs import RunStatus

DEFAULT_GRAPH = "research-agent"


async def send_events(params: SendMessageRequest, call: Caller) -> AsyncGenerator[Event, None]:
    """The events of a send: a new run, or the answer to a waiting one."""
    message = params.message
    check_media_types(message)
    if message.task_id:
        async for event in _answer(call, message):
            yield event
        return
    workflow_id, graph = await _start(call, message, params)
    initial = Task(id=workflow_id, context_id=workflow_id)
    initial.status.state = TaskState.TASK_STATE_WORKING
    initial.history.append(_user_copy(message, workflow_id))
    initial.metadata.update(task_metadata(workflow_id, call.identity.user_id, graph))
    yield initial
    async with follower_of(call, workflow_id) as follower:
        async for event in run_events(call, workflow_id, follower):
            yield event


# What a message part may carry (the agent card's defaultInputModes): text and
# JSON data. Files are uploaded over REST (POST /files), not sent as A2A parts.
ACCEPTED_MEDIA_TYPES = ("text/plain", "application/json")


def _readable(kind: str | None, media_type: str) -> bool:
    if kind == "text":
        return not media_type or media_type.startswith("text/")
    if kind == "data":
        return not media_type or media_type == "application/json" or media_type.endswith("+json")
    return False  # raw bytes or a URL: a file


def check_media_types(message: Message) -> None:
    """Refuse a part the agent cannot read, as A2A §3.1.1 asks.

    Raises:
        ContentTypeNotSupportedError: a file part (raw bytes or a URL), a text
            part that is not ``text/*`` or a data part that is not JSON.
    """
    for index, part in enumerate(message.parts):
        media_type = part.media_type.split(";")[0].strip().lower()
        if not _readable(part.WhichOneof("content"), media_type):
            shown = media_type or "application/octet-stream"
            raise ContentTypeNotSupportedError(
                message=f"message part {index}: media type '{shown}' is not supported "
                f"(accepted: {', '.join(ACCEPTED_MEDIA_TYPES)})",
                data={"field": f"message.parts[{index}]", "mediaType": shown},
            )


async def _start(call: Caller, message: Message, params: SendMessageRequest) -> tuple[str, str]:
    """Start the run a new message asks for; returns its workflow id and graph."""
    graph = _graph_of(message, params)
    try:
        admitted = await admit_start(call)
        spec = await admitted.graph(graph)
        body = StartRunRequest(
            graph=graph,
            input=run_input(message, spec.input_schema),
            **run_options(message, params),
        )
        started, _ = await admitted.start(body)
    except NotFound as exc:
        raise InvalidParamsError(
            message=exc.detail, data={"field": "message.metadata.graph", "reason": "not registered"}
        ) from exc
    except ValidationFailed as exc:
        raise InvalidParamsError(message=exc.detail, data={"errors": exc.errors}) from exc
    except RateLimited as exc:
        raise rate_limited(exc) from exc
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc
    return started.workflow_id, graph


# Metadata keys of a message (or of the send) that set what POST /runs's body
# fields set: A2A's camelCase, or the REST field's name.
RUN_OPTIONS = {
    "budget": "budget",
    "deadlineSeconds": "deadline_seconds",
    "deadline_seconds": "deadline_seconds",
    "conversationId": "conversation_id",
    "conversation_id": "conversation_id",
}


def run_options(message: Message, params: SendMessageRequest) -> dict[str, Any]:
    """``budget``, ``deadline_seconds`` and ``conversation_id`` from the metadata,
    checked as ``POST /runs`` checks them (the message's metadata wins).

    Raises:
        InvalidParamsError: a value ``POST /runs`` would refuse, naming the key.
    """
    found: dict[str, tuple[str, Any]] = {}
    for metadata, where in ((params.metadata, "metadata"), (message.metadata, "message.metadata")):
        values = MessageToDict(metadata) if metadata is not None else {}
        for key, field in RUN_OPTIONS.items():
            if key in values:
                found[field] = (f"{where}.{key}", values[key])
    if not found:
        return {}
    options = {field: value for field, (_, value) in found.items()}
    try:
        StartRunRequest.model_validate({"graph": "g", **options})
    except ValidationError as exc:
        errors = []
        for error in exc.errors(include_url=False, include_input=False):
            loc = error["loc"] or ("metadata",)
            path = found[str(loc[0])][0] if str(loc[0]) in found else "metadata"
            rest = "".join(f".{p}" for p in loc[1:])
            errors.append({"field": path + rest, "message": error["msg"]})
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
        raise InvalidParamsError(message=summary, data={"errors": errors}) from exc
    return options


def rate_limited(exc: RateLimited) -> InvalidRequestError:
    """A tenant limit as A2A's error: -32600 with ``data.reason`` RATE_LIMITED, the
    message naming the limit and setting, as a stream over its limit gets."""
    # A string: in 1.0 the data becomes google.rpc.ErrorInfo metadata (string values).
    retry_after = str(exc.retry_after or 1)
    return InvalidRequestError(
        message=exc.detail, data={"reason": "RATE_LIMITED", "retryAfter": retry_after}
    )


def _graph_of(message: Message, params: SendMessageRequest) -> str:
    for metadata in (message.metadata, params.metadata):
        value = metadata.fields.get("graph") if metadata is not None else None
        if value is not None and value.string_value:
            return value.string_value
    return DEFAULT_GRAPH


async def _answer(call: Caller, message: Message) -> AsyncGenerator[Event, None]:
    """A follow-up message: the answer to the run's pending prompt, then its events."""
    task_id = message.task_id
    owner = await authorize(call, task_id, RunAction.CONTROL)
    async with follower_of(call, task_id, from_now=True) as follower:
        try:
            await signal_run(call, RunSignal(workflow_id=task_id, input=user_answer(message)))
        except NotFound as exc:
            raise TaskNotFoundError(message=f"task '{task_id}' was not found") from exc
        except Conflict as exc:
            raise UnsupportedOperationError(
                message=f"task '{task_id}' is not waiting for input: {exc.detail}"
            ) from exc
        except ValidationFailed as exc:
            raise InvalidParamsError(message=exc.detail, data={"errors": exc.errors}) from exc
        except RateLimited as exc:
            raise rate_limited(exc) from exc
        except SpindleError as exc:
            raise InternalError(message=exc.detail) from exc
        task = Task(id=task_id, context_id=task_id)
        task.status.state = TaskState.TASK_STATE_WORKING
        task.history.append(_user_copy(message, task_id))
        task.metadata.update(task_metadata(task_id, owner.user_id, None))
        yield task
        async for event in run_events(call, task_id, follower):
            yield event


async def run_events(
    call: Caller, task_id: str, follower: RunFollower, *, until_terminal: bool = False
) -> AsyncIterator[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """The run's messages as A2A events, until it asks for input or ends.

    Args:
        until_terminal: go on past a question until the run ends (a
            subscription, A2A §3.1.6: it ends at a terminal state only).
    """
    async for message in follower.messages():
        if asks_for_input(message):
            yield input_required_event(task_id, message)
            if not until_terminal:
                return
            continue
        if message.ends_conversation:
            for event in await final_events(call, task_id, message):
                yield event
            return
        progress = progress_event(task_id, message)
        if progress is not None:
            yield progress


async def final_events(
    call: Caller, task_id: str, last: CompactMessage
) -> list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """How the run ended, from Temporal and the archive once the workflow closed."""
    await wait_closed(call, task_id)
    detail = await describe(call, task_id)
    if detail.status in (RunStatus.RUNNING, RunStatus.PAUSED):
        # Not closed in time: the last message says how it ended.
        claimed = last.d.get("status") if isinstance(last.d, dict) else None
        detail.status = str(claimed or RunStatus.TERMINATED)
    task = task_from_run(detail)
    state = task.status.state
    events: list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent] = []
    if state == TaskState.TASK_STATE_COMPLETED:
        events.append(artifact_event(task_id, detail.output))
    message = task.status.message if task.status.HasField("message") else None
    if state == TaskState.TASK_STATE_CANCELED:
        message = agent_message(task_id, last.m or f"run {detail.status}")
    events.append(status_event(task_id, state, message))
    return events


def _user_copy(message: Message, task_id: str) -> Message:
    copy = Message()
    copy.CopyFrom(message)
    copy.task_id = task_id
    copy.context_id = task_id
    return copy
