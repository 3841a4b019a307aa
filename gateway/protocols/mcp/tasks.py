"""MCP Tasks (2025-11-25, basic/utilities/tasks) for graph tools, on the plain protocol.

The ``mcp`` SDK in use (2.3.0) leaves ``tasks/*`` out on purpose (its method
tables say "deliberately absent"), so this module serves them itself through
the SDK's two open doors: a server middleware that takes a ``tools/call``
carrying ``task`` before the SDK would sieve its answer as a ``CallToolResult``,
and ``add_request_handler`` for ``tasks/get``, ``tasks/result``,
``tasks/cancel`` and ``tasks/list`` (docs/protocols/mcp.md, "Tasks").

The task id IS the run's workflow id: a task lives as long as its run is kept
(``ttl`` is ``null``), and every check is the REST routes' (``authorize``:
another tenant's run is an unknown task, ``-32602``; cancelling needs control
of the run). Cancelling goes through ``services.run_control.cancel_run``, as
``POST /runs/{id}/cancel`` does.

A task's stream is its run's messages: ``tasks/result`` follows them after a
cursor (``_meta["spindle/afterSeq"]``, the ``seq`` of the last one seen), and
every progress notification names its message's ``seq`` in
``_meta["spindle/seq"]``, so a client that lost its connection resumes
gap-free from where it was (docs/streaming/gap-free.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, cast

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ValidationError

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.run_events import idle_wait
from spindle.gateway.protocols.a2a.spindle_call import CLOSE_WAIT
from spindle.gateway.protocols.a2a.task_mapping import (
    PROGRESS_TYPES,
    IdleWatch,
    asks_for_input,
    status_text,
)
from spindle.gateway.protocols.mcp.conversation import converse
from spindle.gateway.protocols.mcp.tools import Context, caller_of, elicit, run_result, start
from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_control import RunStop, cancel_run
from spindle.gateway.services.run_streams import messages_after, take_slot
from spindle.gateway.services.run_views import RunLookup, authorize, await_close, describe_run
from spindle.gateway.streams.cursor import CursorOutOfRange
from spindle.shared.contracts.errors import Conflict, NotFound, SpindleError
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.contracts.runs import RunStatus

log = logging.getLogger(__name__)

RELATED_TASK = "io.modelcontextprotocol/related-task"
SEQ_META = "spindle/seq"
AFTER_SEQ_META = "spindle/afterSeq"

CAPABILITY = types.ServerTasksCapability(
    list=types.TasksListCapability(),
    cancel=types.TasksCancelCapability(),
    requests=types.ServerTasksRequestsCapability(
        tools=types.TasksToolsCapability(call=types.TasksCallCapability())
    ),
)

_STATUS: dict[str, types.TaskStatus] = {
    RunStatus.COMPLETED: "completed",
    RunStatus.FAILED: "failed",
    RunStatus.TERMINATED: "failed",
    RunStatus.TIMED_OUT: "failed",
    RunStatus.CANCELED: "cancelled",
}
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

# Watchers of started tasks (status and progress notifications): held so they
# are not collected while they run.
_WATCHERS: set[asyncio.Task[None]] = set()


def _invalid(message: str) -> MCPError:
    return MCPError(code=types.INVALID_PARAMS, message=message)


def _iso(value: datetime | None) -> str:
    return (value or datetime.now(UTC)).isoformat()


def task_status(status: str, pending_input: object) -> types.TaskStatus:
    """The MCP task status of a run's status (a run waiting on a prompt is ``input_required``)."""
    mapped = _STATUS.get(status)
    if mapped is not None:
        return mapped
    return "input_required" if pending_input or status == RunStatus.PAUSED else "working"


def task_of(detail: RunDetail, poll_ms: int) -> types.Task:
    """The run as an MCP task (its id is the run's)."""
    status = task_status(detail.status, detail.pending_input)
    message = detail.error if status in ("failed", "cancelled") else None
    if status == "input_required" and detail.pending_input is not None:
        message = detail.pending_input.prompt
    return types.Task(
        task_id=detail.workflow_id,
        status=status,
        status_message=message or f"run {detail.status}",
        created_at=_iso(detail.created_at),
        last_updated_at=_iso(detail.closed_at or detail.updated_at or detail.created_at),
        ttl=None,
        poll_interval=poll_ms,
    )


def _dump(model: types.Task | types.CallToolResult) -> dict[str, Any]:
    dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
    if isinstance(model, types.Task):
        dumped["ttl"] = model.ttl  # required by the spec: null is "kept as long as the run"
    return dumped


async def _task(caller: Caller, task_id: str, action: RunAction) -> RunDetail:
    """The run behind ``task_id`` if the caller may ``action`` it (else -32602)."""
    try:
        await authorize(caller, task_id, action)
        return await describe_run(caller, RunLookup(workflow_id=task_id))
    except NotFound as exc:
        raise _invalid(f"task '{task_id}' was not found") from exc
    except SpindleError as exc:
        raise _invalid(f"task '{task_id}': {exc.detail}") from exc


def _poll_ms(caller: Caller) -> int:
    return caller.state.settings.mcp_task_poll_ms


# -- tools/call with ``task`` ----------------------------------------------------


async def tasks_middleware(ctx: Context, call_next: CallNext) -> HandlerResult:
    """A ``tools/call`` carrying ``task`` starts the run and answers ``CreateTaskResult``."""
    params = ctx.params
    if ctx.method != "tools/call" or not isinstance(params, Mapping) or "task" not in params:
        return await call_next(ctx)
    try:
        call = types.CallToolRequestParams.model_validate(dict(params), by_name=False)
    except ValidationError as exc:
        raise _invalid(f"invalid tools/call params: {exc.errors()[0]['msg']}") from exc
    caller = caller_of(ctx)
    started = await start(caller, call)
    if isinstance(started, types.CallToolResult):
        # Arguments the graph refuses: the tool error the plain call answers (no task).
        return _dump(started)
    now = datetime.now(UTC).isoformat()
    task = types.Task(
        task_id=started,
        status="working",
        status_message="run started",
        created_at=now,
        last_updated_at=now,
        ttl=None,
        poll_interval=_poll_ms(caller),
    )
    token = call.meta.get("progress_token") if call.meta is not None else None
    watcher = asyncio.create_task(_watch(ctx, caller, started, token))
    _WATCHERS.add(watcher)
    watcher.add_done_callback(_WATCHERS.discard)
    return {"task": _dump(task)}


class _Raw(BaseModel):
    """A notification the SDK's typed union leaves out (``notifications/tasks/status``)."""

    method: str
    params: dict[str, Any]


async def _notify(ctx: Context, method: str, params: dict[str, Any]) -> None:
    """A notification on the session's own stream (the request that started the task is over)."""
    # The session sends any model by its dumped method and params; its union
    # type leaves notifications/tasks/status out (types-only in the SDK).
    raw = _Raw(method=method, params=params)
    await ctx.session.send_notification(cast(types.ServerNotification, raw))


async def _watch(ctx: Context, caller: Caller, task_id: str, token: str | int | None) -> None:
    """Status (and, with a progress token, progress) notifications until the run ends.

    Best effort under one of the tenant's stream slots: with none free, or once
    the session is gone, it stops; ``tasks/get`` still answers.
    """
    try:
        lease = await take_slot(caller)
    except SpindleError:
        return
    try:
        idle = IdleWatch()
        async with contextlib.aclosing(messages_after(caller, task_id, 0)) as messages:
            async for item in messages:
                message = CompactMessage.model_validate_json(item.raw)
                waiting = idle.event(task_id, message)
                if asks_for_input(message) or message.ends_conversation:
                    await _notify_status(ctx, caller, task_id, message)
                elif waiting is not None:  # an interactive agent answered and waits
                    await _notify_waiting(ctx, caller, task_id, status_text(waiting))
                elif token is not None and message.t in PROGRESS_TYPES and message.m:
                    progress = _progress(token, task_id, message, item.seq)
                    await _notify(ctx, "notifications/progress", progress)
                await lease.refresh()
                if message.ends_conversation:
                    return
    except Exception as exc:  # the session closed, Redis went away: polling still works
        log.debug("mcp task %s: watcher stopped: %r", task_id, exc)
    finally:
        await lease.release()


async def _notify_status(
    ctx: Context, caller: Caller, task_id: str, message: CompactMessage
) -> None:
    closing = message.ends_conversation
    if closing:  # the closing message is posted just before Temporal closes the run
        await await_close(caller, task_id, CLOSE_WAIT.total_seconds())
    task = task_of(await describe_run(caller, RunLookup(workflow_id=task_id)), _poll_ms(caller))
    if not closing and task.status == "working":
        # The prompt's message may be read before the run's record shows it waiting.
        task = task.model_copy(update={"status": "input_required", "status_message": message.m})
    await _notify(ctx, "notifications/tasks/status", _dump(task))


async def _notify_waiting(ctx: Context, caller: Caller, task_id: str, answer: str) -> None:
    task = task_of(await describe_run(caller, RunLookup(workflow_id=task_id)), _poll_ms(caller))
    if task.status == "working":
        task = task.model_copy(update={"status": "input_required", "status_message": answer})
    await _notify(ctx, "notifications/tasks/status", _dump(task))


def _progress(token: str | int, task_id: str, message: CompactMessage, seq: int) -> dict[str, Any]:
    """A progress notification's params: the message's ``seq`` is both progress and cursor."""
    return {
        "progressToken": token,
        "progress": seq,
        "message": message.m,
        "_meta": {SEQ_META: seq, RELATED_TASK: {"taskId": task_id}},
    }


# -- tasks/get, tasks/cancel, tasks/list --------------------------------------------


async def get_task(ctx: Context, params: types.GetTaskRequestParams) -> dict[str, Any]:
    """``tasks/get``: the run's state as a task."""
    caller = caller_of(ctx)
    detail = await _task(caller, params.task_id, RunAction.READ)
    task = task_of(detail, _poll_ms(caller))
    if task.status == "working":
        waiting = await idle_wait(caller, detail)
        if waiting is not None:  # an interactive agent answered and waits for the user
            update = {"status": "input_required", "status_message": status_text(waiting)}
            task = task.model_copy(update=update)
    return _dump(task)


async def cancel_task(ctx: Context, params: types.CancelTaskRequestParams) -> dict[str, Any]:
    """``tasks/cancel``: cancel the run as ``POST /runs/{id}/cancel`` does."""
    caller = caller_of(ctx)
    task_id = params.task_id
    detail = await _task(caller, task_id, RunAction.CONTROL)
    status = task_status(detail.status, detail.pending_input)
    if status in TERMINAL:
        raise _invalid(f"task '{task_id}' is already {status} and cannot be cancelled")
    try:
        await cancel_run(caller, RunStop(workflow_id=task_id, reason="tasks/cancel (MCP)"))
    except Conflict as exc:
        raise _invalid(f"task '{task_id}': {exc.detail}") from exc
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc
    await await_close(caller, task_id, CLOSE_WAIT.total_seconds())
    task = task_of(await describe_run(caller, RunLookup(workflow_id=task_id)), _poll_ms(caller))
    if task.status not in TERMINAL:  # Temporal has the request; the run ends as cancelled
        task = task.model_copy(update={"status": "cancelled"})
    return _dump(task)


async def list_tasks(ctx: Context, params: types.PaginatedRequestParams) -> dict[str, Any]:
    """``tasks/list``: the tenant's runs, newest first (``GET /runs``'s scope)."""
    caller = caller_of(ctx)
    size = caller.state.settings.mcp_tasks_page_size
    offset = _offset(params.cursor)
    records, total = await caller.state.archive.list_runs(
        tenant_id=caller.identity.tenant_id, limit=size, offset=offset
    )
    tasks = [
        _dump(
            types.Task(
                task_id=record.workflow_id,
                status=task_status(record.status, record.pending_input),
                status_message=record.error or f"run {record.status}",
                created_at=_iso(record.created_at),
                last_updated_at=_iso(record.updated_at),
                ttl=None,
                poll_interval=_poll_ms(caller),
            )
        )
        for record in records
    ]
    answer: dict[str, Any] = {"tasks": tasks}
    if offset + len(records) < total:
        answer["nextCursor"] = str(offset + len(records))
    return answer


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise _invalid("cursor is not one this server issued")
    return int(cursor)


# -- tasks/result --------------------------------------------------------------------


async def task_result(ctx: Context, params: types.GetTaskPayloadRequestParams) -> dict[str, Any]:
    """``tasks/result``: the tool's result, once the run ends (blocking until then).

    While it waits it reports the run's progress messages after the cursor
    (``_meta["spindle/afterSeq"]``) when the request has a progress token, and
    asks a prompt the run waits on as an elicitation on this request's stream.
    """
    caller = caller_of(ctx)
    task_id = params.task_id
    detail = await _task(caller, task_id, RunAction.READ)
    after_seq = _after_seq(params)
    wants_progress = ctx.meta is not None and ctx.meta.get("progress_token") is not None
    if task_status(detail.status, None) not in TERMINAL or wants_progress:
        # A finished run's progress is replayed from the store after the cursor.
        await _follow(ctx, caller, task_id, after_seq)
    result = await run_result(caller, task_id, None)
    meta = dict(result.meta or {})
    meta[RELATED_TASK] = {"taskId": task_id}
    dumped = _dump(result.model_copy(update={"meta": meta}))
    dumped.pop("resultType", None)  # 2026-07-28 vocabulary: Tasks are 2025-11-25's
    return dumped


def _after_seq(params: types.GetTaskPayloadRequestParams) -> int:
    meta = cast(Mapping[str, Any], params.meta or {})
    value = meta.get(AFTER_SEQ_META, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _invalid(f"_meta.{AFTER_SEQ_META} must be a message seq (an integer >= 0)")
    return value


async def _follow(ctx: Context, caller: Caller, task_id: str, after_seq: int) -> None:
    """Follow the run after ``after_seq`` until its conversation ends."""
    try:
        lease = await take_slot(caller)
    except SpindleError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=exc.detail) from exc
    try:
        # The shared resume (live, then the archive): a cursor older than what is
        # kept, or one the run never reached, is an explicit error, never a skip.
        idle = IdleWatch()
        async with contextlib.aclosing(messages_after(caller, task_id, after_seq)) as messages:
            async for item in messages:
                message = CompactMessage.model_validate_json(item.raw)
                if message.ends_conversation:
                    return
                waiting = idle.event(task_id, message)
                if waiting is not None and await _still_waiting(caller, task_id, item.seq):
                    await converse(ctx, caller, task_id, status_text(waiting))
                    continue
                if asks_for_input(message) and ctx.session.can_send_request:
                    detail = await describe_run(caller, RunLookup(workflow_id=task_id))
                    if detail.pending_input is not None:  # not one answered already
                        await elicit(ctx, caller, task_id, message)
                elif message.t in PROGRESS_TYPES and message.m:
                    await _report(ctx, task_id, message, item.seq)
                await lease.refresh()
    except CursorOutOfRange as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=exc.detail, data=exc.data()) from exc
    finally:
        await lease.release()


async def _still_waiting(caller: Caller, task_id: str, seq: int) -> bool:
    """Whether the IDLE at ``seq`` is the wait the run is in now: a ``tasks/result``
    after an older cursor replays waits the user has answered already."""
    current = await idle_wait(caller, await describe_run(caller, RunLookup(workflow_id=task_id)))
    return current is not None and current.status.message.message_id == f"{task_id}-idle-{seq}"


async def _report(ctx: Context, task_id: str, message: CompactMessage, seq: int) -> None:
    """A progress notification on the ``tasks/result`` request's stream (with its token)."""
    token = ctx.meta.get("progress_token") if ctx.meta is not None else None
    if token is None:
        return
    params = types.ProgressNotificationParams.model_validate(
        _progress(token, task_id, message, seq), by_name=False
    )
    await ctx.session.send_notification(
        types.ProgressNotification(params=params), related_request_id=ctx.request_id
    )
