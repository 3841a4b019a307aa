"""A2A get, cancel and subscribe on seed 003 ``tasks.*`` tasks, by the same id.

An A2A task id is a run's workflow id (``run-<hex>``) or, for a task made by
``tasks.create`` / ``tasks.execute``, that task's UUID: the handler asks this
module first for a UUID of the caller's tenant's task store. The mapping is
``protocols.jsonrpc.task_a2a``'s (the one ``tasks.execute`` answers with under
``response_format: "a2a"``). The rules are the A2A ones:

- ``GetTask``: the task now (its history is empty: a ``tasks.*`` task is not a
  conversation);
- ``CancelTask``: what ``tasks.cancel`` does (the run of its tree and every
  task still active, or the task alone if it never ran), then the task; a
  terminal task (completed, failed or cancelled) is ``TaskNotCancelableError``
  (-32002), another user's task without a run-control role
  ``UnsupportedOperationError`` (-32004, as for runs);
- ``SubscribeToTask``: the task, then a status update per event of the task in
  the tree's event log (``spindle.shared.tasks.events``, the log a streaming
  ``tasks.execute`` reads) from the moment of the call, then the result
  artifact and the terminal update; a terminal task is
  ``UnsupportedOperationError``. The stream also ends when the tree's root
  ends (a task of the tree that never ran stays as it was).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from a2a.helpers import new_text_part
from a2a.server.events import Event
from a2a.types import (
    Message,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    InternalError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from redis.exceptions import RedisError

from spindle.gateway.protocols.jsonrpc.task_a2a import STATE_BY_TASK_STATUS, a2a_task
from spindle.gateway.protocols.jsonrpc.task_event_stream import TaskEvents
from spindle.gateway.protocols.jsonrpc.task_execution import cancel_task
from spindle.gateway.services.callers import Caller
from spindle.gateway.streams.follower import StreamCursor, StreamFollower
from spindle.shared.bus.hub import SubscriptionLost
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.contracts.tasks import TERMINAL_STATUSES, is_uuid
from spindle.shared.contracts.tasks import Task as SeedTask
from spindle.shared.tasks.events import TaskEvent, TaskEventLog


async def find_seed_task(call: Caller, task_id: str) -> SeedTask | None:
    """The caller's tenant's ``tasks.*`` task ``task_id``; None for any other id."""
    if not is_uuid(task_id):
        return None
    try:
        return await call.state.tasks.find(call.tenant_id, task_id)
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc


def _may_control(call: Caller, task: SeedTask) -> bool:
    identity = call.identity
    return identity.user_id == task.user_id or identity.has_any_role(
        call.state.settings.run_control_roles
    )


async def cancel_seed_task(call: Caller, task: SeedTask) -> SeedTask:
    """A2A ``CancelTask`` of a ``tasks.*`` task (module docs)."""
    if not _may_control(call, task):
        raise UnsupportedOperationError(message=f"task '{task.id}' belongs to another user")
    if task.status in TERMINAL_STATUSES:
        raise TaskNotCancelableError(
            message=f"task '{task.id}' is {task.status}: only a submitted or working task cancels"
        )
    try:
        current = await cancel_task(call, call.state.tasks, task)
    except SpindleError as exc:
        raise InternalError(message=exc.detail) from exc
    return current or task


def _status_update(task_id: str, event: TaskEvent) -> TaskStatusUpdateEvent:
    state = STATE_BY_TASK_STATUS.get(event.data.status, TaskState.TASK_STATE_WORKING)
    update = TaskStatusUpdateEvent(
        task_id=task_id, context_id=task_id, status=TaskStatus(state=state)
    )
    if event.data.error:
        update.status.message.CopyFrom(
            Message(
                message_id=f"{task_id}-{event.data.status}",
                role=Role.ROLE_AGENT,
                parts=[new_text_part(event.data.error)],
                task_id=task_id,
                context_id=task_id,
            )
        )
    update.metadata.update(
        {
            "protocol": "a2a",
            "rootTaskId": event.data.root_task_id,
            "progress": event.data.progress,
            "event": event.event,
        }
    )
    return update


async def seed_task_events(call: Caller, task: SeedTask) -> AsyncIterator[Event]:
    """A2A ``SubscribeToTask`` of a ``tasks.*`` task (module docs)."""
    if task.status in TERMINAL_STATUSES:
        raise UnsupportedOperationError(
            message=f"task '{task.id}' has already finished: nothing to subscribe to"
        )
    log = TaskEventLog(call.state.bus.redis)
    root_id = task.root_task_id or task.id
    follower = StreamFollower(
        TaskEvents(log, root_id),
        hub=call.state.hub,
        cursor=StreamCursor(live_only=True),
        idle_seconds=float(call.state.settings.sse_keepalive_seconds),
    )
    try:
        async with follower, contextlib.aclosing(follower.batches()) as batches:
            # Read after subscribing: nothing between the snapshot and the events is lost.
            current = await call.state.tasks.find(call.tenant_id, task.id) or task
            yield a2a_task(current)
            if current.status in TERMINAL_STATUSES:
                return
            async for batch in batches:
                for item in batch:
                    event = TaskEvent.model_validate_json(item.raw)
                    if event.data.task_id == task.id:
                        for update in await _updates(call, task.id, event):
                            yield update
                        if event.data.status in TERMINAL_STATUSES:
                            return
                    if event.ends_tree:
                        return
    except (SubscriptionLost, RedisError) as exc:
        raise InternalError(message=f"the task's event log cannot be followed: {exc}") from exc


async def _updates(
    call: Caller, task_id: str, event: TaskEvent
) -> list[TaskStatusUpdateEvent | TaskArtifactUpdateEvent]:
    """The A2A events of one task event: the result artifact first when it completed."""
    update = _status_update(task_id, event)
    if event.data.status != "completed":
        return [update]
    done = await call.state.tasks.find(call.tenant_id, task_id)
    artifacts = a2a_task(done).artifacts if done is not None else []
    found = [
        TaskArtifactUpdateEvent(
            task_id=task_id, context_id=task_id, artifact=artifact, last_chunk=True
        )
        for artifact in artifacts
    ]
    return [*found, update]
