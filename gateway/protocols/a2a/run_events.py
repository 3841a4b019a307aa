"""A2A sends as run operations: start a run or answer it, then follow its messages.

Each flow is an async generator of A2A events: first the ``Task`` (working),
then ``working`` status updates for the run's progress messages, until the run
asks for input (an ``input-required`` update) or ends (the ``result`` artifact
and ``completed``, or ``failed`` with the error, or ``canceled``), read from
Temporal and the archive once the workflow closed.

Every event built from a run message carries its cursor in ``metadata``:
``spindle.seq`` (the message's seq) and ``spindle.eventId`` (``<seq>.<k>``, k
its index among that message's events). A subscription with the
``A2A-Last-Event-ID`` header (either form) resumes after it, live or from the
archive after the run ended (``resumed_events``; the Spindle resume extension,
docs/protocols/a2a.md#resume-by-cursor, in the direction of A2A #1986); a
cursor older than what is kept or beyond the run's end is a JSON-RPC -32602
with ``reason`` CURSOR_EXPIRED / CURSOR_BEYOND_END in its data.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Mapping
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

from spindle.gateway.models import RunDetail, StartRunRequest
from spindle.gateway.protocols.a2a.run_follower import RunFollower
from spindle.gateway.protocols.a2a.spindle_call import (
    authorize,
    describe,
    follower_of,
    wait_closed,
)
from spindle.gateway.protocols.a2a.task_mapping import (
    STATE_BY_STATUS,
    IdleWatch,
    agent_message,
    artifact_events,
    asks_for_input,
    input_required_event,
    progress_event,
    run_input,
    scan_wait,
    status_event,
    task_from_run,
    task_metadata,
    user_answer,
    wait_event,
)
from spindle.gateway.runs.access import RunAction
from spindle.gateway.runs.temporal import describe_workflow, run_status_of
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_input import RunSignal, complete_agent, signal_run
from spindle.gateway.services.run_starts import admit_start
from spindle.gateway.services.run_streams import RunFollow, run_follower
from spindle.gateway.streams.cursor import CursorOutOfRange
from spindle.shared.contracts.errors import (
    Conflict,
    NotFound,
    RateLimited,
    SpindleError,
    ValidationFailed,
)
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.contracts.runs import RunStatus


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
    graph = _graph_of(message, params, call.state.settings.a2a_default_graph)
    try:
        admitted = await admit_start(call)
        spec = await admitted.graph(graph)
        body = StartRunRequest(
            graph=graph,
            input=run_input(message, spec.input_schema),
            # The message's ids, for graphs that route on them (``meta.a2a``,
            # docs/protocols/a2a.md: the a2a-tck example graph routes on messageId).
            meta={"a2a": {"messageId": message.message_id, "contextId": message.context_id}},
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


def _graph_of(message: Message, params: SendMessageRequest, default: str) -> str:
    """The graph ``metadata.graph`` names, else ``default`` (``a2a_default_graph``)."""
    for metadata in (message.metadata, params.metadata):
        value = metadata.fields.get("graph") if metadata is not None else None
        if value is not None and value.string_value:
            return value.string_value
    return default


# A follow-up message's metadata key that ends the listening agent instead of
# talking to it (``spindle chat``'s ``/done``; docs/protocols/a2a.md).
COMPLETE_KEY = "complete"


def asks_to_complete(message: Message) -> bool:
    value = message.metadata.fields.get(COMPLETE_KEY) if message.metadata is not None else None
    return value is not None and value.bool_value


async def _deliver(call: Caller, message: Message) -> None:
    """The message to the run: the prompt's answer or the listening agent's message
    (``user_message``), or, with ``metadata.complete``, the end of that agent."""
    task_id = message.task_id
    if asks_to_complete(message):
        await complete_agent(call, task_id)
    else:
        await signal_run(call, RunSignal(workflow_id=task_id, input=user_answer(message)))


async def _answer(call: Caller, message: Message) -> AsyncGenerator[Event, None]:
    """A follow-up message: the answer to the run's pending prompt or a message for
    its listening agent, then its events."""
    task_id = message.task_id
    owner = await authorize(call, task_id, RunAction.CONTROL)
    async with follower_of(call, task_id, from_now=True) as follower:
        try:
            await _deliver(call, message)
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
        async for event in run_events(call, task_id, follower, after_send=True):
            yield event


# The request header of the Spindle resume extension (the name A2A #1986 discusses).
CURSOR_HEADER = "a2a-last-event-id"
SEQ_KEY = "spindle.seq"
EVENT_ID_KEY = "spindle.eventId"

RunEvent = TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def resume_cursor(headers: Mapping[str, str] | None) -> tuple[int, int] | None:
    """The ``A2A-Last-Event-ID`` of a request: ``<seq>`` or ``<seq>.<k>`` (None: absent).

    A bare seq stands for every event of that message (``(seq, max)``).

    Raises:
        InvalidParamsError: a value that is neither form.
    """
    value = (headers or {}).get(CURSOR_HEADER)
    if value is None or not value.strip():
        return None
    seq, dot, index = value.strip().partition(".")
    if seq.isdigit() and (not dot or index.isdigit()):
        return int(seq), int(index) if dot else 2**31
    raise InvalidParamsError(
        message=f"A2A-Last-Event-ID must be '<seq>' or '<seq>.<k>' (spindle.eventId), "
        f"got {value!r}",
        data={"field": "A2A-Last-Event-ID", "reason": "INVALID_CURSOR"},
    )


def cursor_error(exc: CursorOutOfRange) -> InvalidParamsError:
    """A cursor that cannot be served whole as -32602, its code and bound in ``data``."""
    # Strings: in 1.0 the data becomes google.rpc.ErrorInfo metadata (string values).
    data = {key: str(value) for key, value in exc.data().items() if value is not None}
    return InvalidParamsError(message=exc.detail, data=data)


async def resumed_subscription(
    call: Caller, task_id: str, user_id: str | None, cursor: tuple[int, int]
) -> AsyncIterator[Event]:
    """A subscription resumed after ``cursor``: the task as it is now, then its events
    after the cursor until the run ends, live or from the archive after the end.

    The cursor is checked before anything is sent.

    Raises:
        InvalidParamsError: the cursor is older than what is kept, or beyond the run's end.
    """
    follower = RunFollower(run_follower(call, RunFollow(workflow_id=task_id, after_seq=cursor[0])))
    try:
        await follower.__aenter__()
    except CursorOutOfRange as exc:
        raise cursor_error(exc) from exc
    try:
        yield await _snapshot(call, task_id, user_id)
        async for event in run_events(call, task_id, follower, until_terminal=True, after=cursor):
            yield event
    finally:
        await follower.__aexit__(None, None, None)


async def _snapshot(call: Caller, task_id: str, user_id: str | None) -> Task:
    """The task as a resumed subscription opens with: its state as Temporal has it.

    Not the whole description (``GetTask`` has it): a client resuming after a
    cursor has the rest in the events that follow, and describing a long run
    (its node reports) on every reconnect would cost more than the resume
    itself. A run Temporal no longer knows is described from the archive.
    """
    try:
        description = await describe_workflow(call.state.temporal, task_id)
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc
    if description is None:
        return task_from_run(await describe(call, task_id), user_id)
    task = Task(id=task_id, context_id=task_id)
    task.status.state = STATE_BY_STATUS.get(
        run_status_of(description), TaskState.TASK_STATE_WORKING
    )
    task.metadata.update(task_metadata(task_id, user_id, None))
    return task


# The last messages a read of a waiting run takes first; four times more each time
# the wait's IDLE and answer are further back (behind other workstreams' messages).
WAIT_READ_FIRST = 64


async def idle_wait(call: Caller, detail: RunDetail) -> TaskStatusUpdateEvent | None:
    """The ``input-required`` update of a run whose interactive agent has answered and
    waits for the next user message (its answer as the status message), else None.

    The run says whether an agent waits (``detail.awaiting_message``, from its
    ``describe`` query, read with the rest of ``detail``); only then is its stream
    read, back from the end in growing pages, for the wait's IDLE and answer
    (``scan_wait``), however many other workstreams' messages came after them.
    """
    agents = detail.awaiting_message
    if not agents:
        return None
    count = WAIT_READ_FIRST
    while True:
        kept, whole = await call.state.bus.tail(detail.workflow_id, count)
        scan = scan_wait(kept, agents)
        if scan.decided or whole:
            return wait_event(detail.workflow_id, scan, agents)
        count *= 4


async def with_idle_status(call: Caller, task: Task, detail: RunDetail) -> Task:
    """``task`` (working) as ``input-required`` when its interactive agent waits for the
    next user message (``idle_wait``); ``detail`` is the run ``task`` was made from."""
    if task.status.state != TaskState.TASK_STATE_WORKING:
        return task
    found = await idle_wait(call, detail)
    if found is not None:
        task.status.CopyFrom(found.status)
    return task


def _stamped(events: list[RunEvent], seq: int, after: tuple[int, int] | None) -> list[RunEvent]:
    """``events`` of the message at ``seq`` with their cursor, those after ``after`` only."""
    out = []
    for index, event in enumerate(events):
        if after is not None and (seq, index) <= after:
            continue
        event.metadata.update({SEQ_KEY: seq, EVENT_ID_KEY: f"{seq}.{index}"})
        out.append(event)
    return out


async def run_events(
    call: Caller,
    task_id: str,
    follower: RunFollower,
    *,
    until_terminal: bool = False,
    after: tuple[int, int] | None = None,
    after_send: bool = False,
) -> AsyncIterator[RunEvent]:
    """The run's messages as A2A events, until it asks for input or ends.

    A prompt (REQUEST_INPUT) and an interactive agent that answered and waits
    for the next user message (its IDLE, ``IdleWatch``) both ask for input.

    Args:
        until_terminal: go on past a question until the run ends (a
            subscription, A2A §3.1.6: it ends at a terminal state only).
        after: drop the events up to this ``(seq, k)`` (a resumed subscription).
        after_send: the follower starts at a follow-up message just sent
            (``IdleWatch``: an IDLE from before it is not its answer).
    """
    idle = IdleWatch(after_send=after_send)
    try:
        async for seq, message in follower.sequenced():
            waiting = idle.event(task_id, message)
            if asks_for_input(message) or waiting is not None:
                asked = waiting or input_required_event(task_id, message)
                for event in _stamped([asked], seq, after):
                    yield event
                if not until_terminal:
                    return
                continue
            if message.ends_conversation:
                for event in _stamped(await final_events(call, task_id, message), seq, after):
                    yield event
                return
            progress = progress_event(task_id, message)
            if progress is not None:
                for event in _stamped([progress], seq, after):
                    yield event
    except CursorOutOfRange as exc:  # what a broken live feed missed is no longer kept
        raise cursor_error(exc) from exc


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
        events.extend(artifact_events(task_id, detail.output))
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
