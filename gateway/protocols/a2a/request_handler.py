"""The A2A request handler: A2A operations carried out on Spindle graph runs.

The a2a-sdk's ``JsonRpcDispatcher`` (v1.0 methods, and v0.3 ones through its
compat adapter) parses, validates and serializes; this handler implements its
``RequestHandler`` interface directly on runs instead of the SDK's
``DefaultRequestHandler``: that one keeps tasks and their event queues in the
memory of one process (its ``AgentExecutor`` runs inside the request), while a
Spindle run lives in Temporal, Redis and Mongo, outlives any gateway process
and is reached from any of them. So the task state is always read from the run
(``describe_run``), events come from the run's message stream, and every
operation checks the caller's tenant like the REST routes do.

- send / stream without ``taskId``: start a run of ``metadata.graph`` (default
  ``research-agent``) with the message as input (``task_mapping.run_input``),
  through ``run_starter.start_run`` as ``POST /runs`` does;
- send / stream with the ``taskId`` of a run waiting for input: the message is
  the prompt's answer or a message for the listening agent (``user_message``,
  ``services.run_input.signal_run``) and the run resumes; with
  ``metadata.complete`` it ends the listening agent instead (``complete_agent``);
- a blocking send returns when the run ends or asks for input (a prompt, or an
  interactive agent that answered and waits: ``input-required`` with its answer);
  a send's stream ends there too, a subscription only when the run ends;
- get, cancel and subscribe address the run by its workflow id (get with the
  run's conversation as ``history``: ``task_history``); list reads the tenant's
  runs from the archive;
- push notification configs (set / get / list / delete, or inline in a send)
  are stored per task after the same tenant check (``push_watch``);
- get, cancel and subscribe also take the UUID of a seed 003 ``tasks.*`` task
  (``seed_tasks``): such a task is an A2A task by the same id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator
from datetime import timedelta

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from spindle.gateway.protocols.a2a.push_watch import (
    DEFAULT_CONFIG_ID,
    PushConfigStore,
    checked_url,
    protocol_of,
    validated,
)
from spindle.gateway.protocols.a2a.run_events import (
    resume_cursor,
    resumed_subscription,
    run_events,
    send_events,
    with_idle_status,
)
from spindle.gateway.protocols.a2a.seed_tasks import (
    cancel_seed_task,
    find_seed_task,
    seed_task_events,
)
from spindle.gateway.protocols.a2a.spindle_call import (
    CLOSE_WAIT,
    authorize,
    call_of,
    describe,
    follower_of,
    wait_closed,
)
from spindle.gateway.protocols.a2a.task_history import limit_history, task_history, with_history
from spindle.gateway.protocols.a2a.task_listing import list_tasks
from spindle.gateway.protocols.a2a.task_mapping import (
    TERMINAL_STATES,
    is_reply,
    require_message,
    task_from_run,
)
from spindle.gateway.protocols.jsonrpc.task_a2a import a2a_task
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_control import is_run_open, request_cancel
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.platform.outbound import outbound_policy

log = logging.getLogger(__name__)

# A blocking send answers with the task as it is after this, still working.
BLOCKING_WAIT = timedelta(minutes=5)


class SpindleRequestHandler(RequestHandler):
    """A2A operations on Spindle runs (see the module docstring)."""

    # -- get / list / cancel ------------------------------------------------

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        call = call_of(context)
        seed = await find_seed_task(call, params.id)
        if seed is not None:
            _history_length(params.history_length if params.HasField("history_length") else None)
            return a2a_task(seed)
        owner = await authorize(call, params.id, RunAction.READ)
        length = _history_length(
            params.history_length if params.HasField("history_length") else None
        )
        detail = await describe(call, params.id)
        history = [] if length == 0 else await task_history(call, detail)
        task = await with_idle_status(call, task_from_run(detail, owner.user_id), detail)
        return with_history(task, history, length)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        call = call_of(context)
        try:
            return await list_tasks(params, call.identity, call.state.archive)
        except SpindleError as exc:
            raise InternalError(message=exc.detail) from exc

    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        call = call_of(context)
        seed = await find_seed_task(call, params.id)
        if seed is not None:
            return a2a_task(await cancel_seed_task(call, seed))
        owner = await authorize(call, params.id, RunAction.CONTROL)
        try:
            running = await is_run_open(call, params.id)
        except SpindleError as exc:
            raise InternalError(message=exc.detail) from exc
        if not running:
            raise TaskNotCancelableError(message=f"task '{params.id}' has already finished")
        async with follower_of(call, params.id, from_now=True) as follower:
            try:
                await request_cancel(call, params.id)
            except SpindleError as exc:
                raise InternalError(message=exc.detail) from exc
            try:
                async with asyncio.timeout(CLOSE_WAIT.total_seconds()):
                    async for _ in follower.messages():
                        pass
            except TimeoutError:
                log.info("a2a cancel of %s: the run has not ended yet", params.id)
        await wait_closed(call, params.id)
        return task_from_run(await describe(call, params.id), owner.user_id)

    # -- send / stream / subscribe -----------------------------------------

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        call = call_of(context)
        require_message(params)
        configuration = params.configuration
        length = None
        if configuration.HasField("history_length"):
            length = _history_length(configuration.history_length)  # refused before the run
        events = _with_inline_push(send_events(params, call), params, call, protocol_of(context))
        task: Task | None = None
        try:
            async with asyncio.timeout(BLOCKING_WAIT.total_seconds()):
                async for event in events:
                    task = _apply(task, event)
                    if task is not None and params.configuration.return_immediately:
                        break
        except TimeoutError:
            log.info("a2a blocking send: run still working after %s", BLOCKING_WAIT)
        finally:
            await events.aclose()
        if task is None:
            raise InternalError(message="the run produced no task")
        if task.status.state == TaskState.TASK_STATE_COMPLETED and is_reply(task):
            # The graph's output is a message (a2a_output): A2A §3.1.1 lets the
            # agent answer a send with a Message; the task stays readable by its id.
            return task.status.message
        return task if length is None else limit_history(task, length)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        call = call_of(context)
        require_message(params)
        async for event in _with_inline_push(
            send_events(params, call), params, call, protocol_of(context)
        ):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        call = call_of(context)
        seed = await find_seed_task(call, params.id)
        if seed is not None:
            async for seed_event in seed_task_events(call, seed):
                yield seed_event
            return
        owner = await authorize(call, params.id, RunAction.READ)
        cursor = resume_cursor(context.state.get("headers"))
        if cursor is not None:
            # The Spindle resume extension (docs/protocols/a2a.md#resume-by-cursor):
            # after the cursor, live or from the archive, also once the task finished.
            async for event in resumed_subscription(call, params.id, owner.user_id, cursor):
                yield event
            return
        async with follower_of(call, params.id, from_now=True) as follower:
            detail = await describe(call, params.id)
            task = await with_idle_status(call, task_from_run(detail, owner.user_id), detail)
            if task.status.state in TERMINAL_STATES:
                raise UnsupportedOperationError(
                    message=f"task '{params.id}' has already finished: nothing to subscribe to"
                )
            yield task
            # A2A §3.1.6: a subscription ends at a terminal state, so it follows
            # the run through its questions (a send's stream stops at each).
            async for event in run_events(call, params.id, follower, until_terminal=True):
                yield event

    # -- push notifications (``push_watch``) -------------------------------

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = call_of(context)
        owner = await authorize(call, params.task_id, RunAction.CONTROL)
        policy = outbound_policy(call.state.settings)
        config = validated(params, params.task_id, policy)
        await checked_url(config, policy)
        cursor = await call.state.bus.last_seq(params.task_id)  # read first: no gap
        snapshot = task_from_run(await describe(call, params.task_id), owner.user_id)
        await _push_store(call).put(
            call.identity, config, snapshot=snapshot, cursor=cursor, protocol=protocol_of(context)
        )
        return masked(config)

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        call = call_of(context)
        await authorize(call, params.task_id, RunAction.READ)
        config = await _push_store(call).get(params.task_id, params.id)
        if config is None:
            raise TaskNotFoundError(
                message=f"task '{params.task_id}' has no push notification config "
                f"'{params.id or DEFAULT_CONFIG_ID}'"
            )
        return masked(config)

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        call = call_of(context)
        await authorize(call, params.task_id, RunAction.READ)
        configs = await _push_store(call).list(params.task_id)
        return ListTaskPushNotificationConfigsResponse(configs=[masked(c) for c in configs])

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        call = call_of(context)
        await authorize(call, params.task_id, RunAction.CONTROL)
        await _push_store(call).delete(params.task_id, params.id)

    # -- the extended card: not offered ------------------------------------

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError


def _history_length(value: int | None) -> int | None:
    """A ``historyLength`` as given (None: no limit).

    Raises:
        InvalidParamsError: a negative one (A2A §3.2.4 counts messages).
    """
    if value is not None and value < 0:
        raise InvalidParamsError(
            message=f"historyLength must be 0 or more, got {value}",
            data={"field": "historyLength"},
        )
    return value


def _push_store(call: Caller) -> PushConfigStore:
    return PushConfigStore(call.state.bus.redis)


async def _with_inline_push(
    events: AsyncGenerator[Event, None],
    params: SendMessageRequest,
    call: Caller,
    protocol: str,
) -> AsyncGenerator[Event, None]:
    """``events``, storing the request's inline push config once the task is known."""
    inline = params.configuration.HasField("task_push_notification_config")
    if inline:
        # Refused before the run starts (``events`` has not run yet).
        policy = outbound_policy(call.state.settings)
        requested = params.configuration.task_push_notification_config
        await checked_url(validated(requested, requested.task_id, policy), policy)
    answered = params.message.task_id
    # An answer resumes a run that already has messages: follow from before the answer.
    cursor = await call.state.bus.last_seq(answered) if inline and answered else 0
    async for event in events:
        if inline and isinstance(event, Task):
            inline = False
            config = validated(params.configuration.task_push_notification_config, event.id)
            await _push_store(call).put(
                call.identity, config, snapshot=event, cursor=cursor, protocol=protocol
            )
        yield event


def _apply(task: Task | None, event: Event) -> Task | None:
    """The task after ``event`` (what a blocking send answers)."""
    if isinstance(event, Task):
        return event
    if task is None:
        return None
    if isinstance(event, TaskStatusUpdateEvent):
        task.status.CopyFrom(event.status)
        if event.status.state in TERMINAL_STATES and event.status.HasField("message"):
            task.history.append(event.status.message)
    elif isinstance(event, TaskArtifactUpdateEvent):
        task.artifacts.append(event.artifact)
    return task


# Shown in place of a stored secret: push tokens and credentials are write-only.
MASK = "********"


def masked(config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
    """``config`` as a caller may see it: the token and credentials replaced by ``MASK``.

    Anyone who may read a task may read its push configs, but the token and
    credentials let their holder post to (or as) the receiver: they are never
    returned once stored, not even to the user who set them.
    """
    shown = TaskPushNotificationConfig()
    shown.CopyFrom(config)
    if shown.token:
        shown.token = MASK
    if shown.HasField("authentication") and shown.authentication.credentials:
        shown.authentication.credentials = MASK
    return shown
