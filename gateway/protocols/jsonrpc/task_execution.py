"""``tasks.execute`` and ``tasks.cancel``: a task tree runs as one durable graph run.

``tasks.execute`` takes either ``task_id`` (a stored tree: the task and its
descendants) or ``tasks`` (task objects, created first exactly as
``tasks.create`` with ``tasks`` would; their ``id`` fields are client-side
references). The tree is validated (``spindle.shared.graphs.task_tree``: -32002 cycle, -32003
unknown executor, -32602 bad params), its root is claimed atomically
(``pending`` → ``in_progress``, so a second execute of the same tree gets
-32000), and ``GraphRun`` starts with the node → task map in its meta. The
worker then mirrors every node onto its task (``spindle.worker.activities.task_sync``).

Streaming (``use_streaming`` in params, or ``metadata.stream`` beside or in
params) answers with ``text/event-stream``: the tree's events from its first
one, ending with the root's ``task_completed`` / ``task_failed`` /
``task_cancelled`` (``spindle.gateway.protocols.jsonrpc.task_event_stream``).
``configuration.push_notification_config`` (beside or in params) makes every
update of the tree POSTed to its URL by the workers' push delivery loop
(``spindle.shared.tasks.push``).

``budget``, ``deadline_seconds`` and ``conversation_id`` in params set what
the same fields of ``POST /runs`` set, checked the same way (-32602 naming
``params.<field>``) before the tree is claimed.

``response_format`` ``a2a`` or ``a2a-0.3`` answers with the root task in A2A's
``Task`` shape instead (``task_a2a``; not with streaming); A2A's get, cancel and
subscribe take the same id (``spindle.gateway.protocols.a2a.seed_tasks``).

``tasks.cancel`` of any task of an executing tree cancels the whole run (its
workflow is cancelled; every active task of the tree becomes ``cancelled`` at
once, the root last); a task that never ran is cancelled alone.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import ValidationError
from starlette.responses import StreamingResponse

from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.models import StartRunRequest
from spindle.gateway.protocols.jsonrpc.registry import (
    TASK_METHODS,
    RpcContext,
    StreamingResult,
    task_store,
    tasks_method,
)
from spindle.gateway.protocols.jsonrpc.task_a2a import a2a_task, response_format, task_json
from spindle.gateway.protocols.jsonrpc.task_event_stream import task_event_frames
from spindle.gateway.protocols.jsonrpc.task_params import (
    invalid,
    require_uuid,
    validation_failed,
)
from spindle.gateway.protocols.jsonrpc.task_rules import require_control
from spindle.gateway.runs.task_runs import settle_run_tasks
from spindle.gateway.runs.temporal import new_workflow_id
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_control import request_cancel
from spindle.gateway.services.run_starts import admit_start, scoped_idempotency_key
from spindle.gateway.services.run_streams import serve_under, take_slot
from spindle.shared.contracts.errors import Conflict, NotFound
from spindle.shared.contracts.tasks import TERMINAL_STATUSES, Task, is_uuid
from spindle.shared.graphs.task_tree import (
    TASK_RUN_META,
    TaskGraph,
    build_task_graph,
)
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.tasks.events import TaskEventLog, status_event
from spindle.shared.tasks.push import PushConfig, PushOutbox, checked_push_config
from spindle.shared.tasks.store import TaskStore
from spindle.shared.tasks.tracking import TaskTracker

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _tracker(ctx: RpcContext, store: TaskStore) -> TaskTracker:
    return TaskTracker(store, ctx.state.bus.redis)


def wants_stream(params: dict[str, Any], envelope: dict[str, Any]) -> bool:
    """Seed 003's streaming switches: ``use_streaming`` or ``metadata.stream``."""
    if params.get("use_streaming") is True:
        return True
    for holder in (envelope, params):
        metadata = holder.get("metadata")
        if isinstance(metadata, dict) and metadata.get("stream") is True:
            return True
    return False


async def _tree_of(store: TaskStore, ctx: RpcContext, root_id: str) -> list[Task]:
    tenant = ctx.identity.tenant_id
    root = await store.find(tenant, root_id)
    if root is None:
        raise NotFound(f"task {root_id} not found")
    return [root, *await store.descendants(tenant, root_id)]


async def _tasks_to_run(
    store: TaskStore, params: dict[str, Any], ctx: RpcContext
) -> tuple[str, list[Task]]:
    """(root id, every task of the tree) for ``task_id`` or ``tasks`` params."""
    task_id = params.get("task_id")
    if task_id is not None:
        if not isinstance(task_id, str):
            raise invalid("task_id", "must be a string")
        require_uuid(task_id, "task_id")
        return task_id, await _tree_of(store, ctx, task_id)
    members = params.get("tasks")
    if not isinstance(members, list) or not members:
        raise invalid("tasks", "a non-empty array of tasks (or task_id) is required")
    first = members[0]
    if len(members) == 1 and isinstance(first, dict) and set(first) == {"id"}:
        stored_id = first["id"]
        if not is_uuid(stored_id):
            raise invalid("tasks[0].id", "Invalid UUID format")
        return stored_id, await _tree_of(store, ctx, stored_id)
    created = await TASK_METHODS["tasks.create"]({"tasks": members}, ctx)
    ids = [str(member["id"]) for member in created["tasks"]]
    found = await store.find_many(ctx.identity.tenant_id, ids)
    return str(created["id"]), [found[i] for i in ids if i in found]


def _check_runnable(tasks: list[Task]) -> None:
    for task in tasks:
        if task.status != "pending":
            raise Conflict(
                f"task {task.id} is {task.status}; only a pending tree can execute "
                f"(copy it with tasks.copy to run it again)"
            )


RUN_OPTIONS = ("budget", "deadline_seconds", "conversation_id")


def run_options(params: dict[str, Any]) -> dict[str, Any]:
    """The ``POST /runs`` options a ``tasks.execute`` carries in its params.

    Raises:
        ValidationFailed: a value ``POST /runs`` refuses (-32602 naming ``params.<field>``).
    """
    options = {key: params[key] for key in RUN_OPTIONS if params.get(key) is not None}
    if options:
        try:
            StartRunRequest.model_validate({"graph": "g", **options})
        except ValidationError as exc:
            raise validation_failed(exc, "params") from exc
    return options


@tasks_method("tasks.execute")
async def execute(params: dict[str, Any], ctx: RpcContext) -> Any:
    """Validate a task tree and run it as one graph run (see the module docstring)."""
    store = await task_store(ctx)
    streaming = wants_stream(params, ctx.envelope) and not ctx.in_batch
    fmt = response_format(params)
    if streaming and fmt != "seed":
        raise invalid(
            "response_format",
            "applies to the non-streaming answer; stream the task as A2A with "
            "SubscribeToTask / tasks/resubscribe and the root task id",
        )
    # Refused here, before anything is claimed, when the URL is not allowed.
    push = await checked_push_config(ctx.envelope, params, outbound_policy(ctx.state.settings))
    options = run_options(params)
    root_id, tasks = await _tasks_to_run(store, params, ctx)
    root = next(t for t in tasks if t.id == root_id)
    require_control(ctx, root)
    _check_runnable(tasks)
    graph = build_task_graph(tasks, await ctx.state.catalog.get(), root_task_id=root_id)
    # Both limits are taken before the tree is claimed: a refusal leaves it untouched.
    lease = await take_slot(ctx.caller) if streaming else None
    try:
        body = await _execute(
            ctx, store, tasks, root_id, graph=graph, push=push, lease=lease, options=options
        )
    except BaseException:
        if lease is not None:
            await lease.release()
        raise
    if fmt == "seed" or not isinstance(body, dict):
        return body
    root_now = await store.find(ctx.identity.tenant_id, root_id)
    return task_json(a2a_task(root_now or root), fmt)


async def _execute(
    ctx: RpcContext,
    store: TaskStore,
    tasks: list[Task],
    root_id: str,
    *,
    graph: TaskGraph,
    push: PushConfig | None,
    lease: StreamLease | None,
    options: dict[str, Any],
) -> Any:
    tenant = ctx.identity.tenant_id
    admitted = await admit_start(ctx.caller)
    # A fresh key fixes the workflow id before the start, so every task names
    # its run before any node of it can finish.
    start_key = f"tasks.execute:{root_id}:{uuid.uuid4().hex}"
    workflow_id = new_workflow_id(tenant, scoped_idempotency_key(ctx.caller, start_key))
    await _claim(store, tenant, root_id, [t.id for t in tasks if t.id != root_id], workflow_id)
    tracker = _tracker(ctx, store)
    if push is not None:
        configured = push.model_copy(update={"tenant_id": tenant})
        await PushOutbox(ctx.state.bus.redis).configure(root_id, configured)
    await tracker.publish(
        status_event(task_id=root_id, root_task_id=root_id, status="in_progress", progress=0.0)
    )
    request = StartRunRequest(
        graph_spec=graph.spec.model_dump(mode="json", by_alias=True, exclude_none=True),
        input={"root_task_id": root_id},
        meta={TASK_RUN_META: graph.meta.model_dump(mode="json")},
        **options,
    )
    try:
        started, _ = await admitted.start(request, idempotency_key=start_key)
    except Exception:
        await _release(store, tenant, [t.id for t in tasks], workflow_id)
        raise
    body = {
        "root_task_id": root_id,
        "status": "started",
        "workflow_id": started.workflow_id,
        "run_id": started.run_id,
        "task_ids": graph.meta.task_ids,
    }
    if lease is not None:
        frames = StreamingResponse(
            task_event_frames(
                ctx.state.hub,
                TaskEventLog(ctx.state.bus.redis),
                root_id,
                float(ctx.state.settings.sse_keepalive_seconds),
            ),
            media_type="text/event-stream",
            headers=SSE_HEADERS,
        )
        return StreamingResult(serve_under(ctx.caller, frames, lease))
    return body


async def _claim(
    store: TaskStore, tenant: str, root_id: str, others: list[str], workflow_id: str
) -> None:
    """Link the tree to its run, atomically per task: a task that is not pending
    or already belongs to a run (a concurrent execute of this tree or of a
    subtree) makes the whole claim fail (-32000) and be undone."""
    if not await store.claim_root(tenant, root_id, workflow_id):
        raise Conflict(f"task {root_id} is already executing")
    if not others:
        return
    if not await store.link_to_run(tenant, others, root_id=root_id, workflow_id=workflow_id):
        await _release(store, tenant, [root_id, *others], workflow_id)
        raise Conflict(f"part of the tree of task {root_id} is already executing")


async def _release(store: TaskStore, tenant: str, task_ids: list[str], workflow_id: str) -> None:
    """Undo a claim whose run could not start (the tree may be executed again)."""
    await store.unlink_from_run(tenant, task_ids, workflow_id)


@tasks_method("tasks.cancel")
async def cancel(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """Cancel a pending or in-progress task (and the run of its tree, if it runs)."""
    store = await task_store(ctx)
    task_id = params.get("task_id")
    if not isinstance(task_id, str):
        raise invalid("task_id", "required (a task UUID)")
    require_uuid(task_id, "task_id")
    task = await store.find(ctx.identity.tenant_id, task_id)
    if task is None:
        raise NotFound(f"task {task_id} not found")
    require_control(ctx, task)
    if task.status in TERMINAL_STATUSES:
        if task.status == "cancelled":
            return {"task_id": task_id, "status": "cancelled"}
        raise Conflict(f"task {task_id} is {task.status}; only pending or in_progress tasks cancel")
    current = await cancel_task(ctx.caller, store, task)
    return {"task_id": task_id, "status": current.status if current else "cancelled"}


async def cancel_task(caller: Caller, store: TaskStore, task: Task) -> Task | None:
    """Cancel ``task`` (not terminal; the caller may control it): the run of its tree
    and every task still active, or the task alone if it never ran. Also A2A's
    ``CancelTask`` of a ``tasks.*`` task (``protocols.a2a.seed_tasks``).

    Returns:
        The task as it is now (None if it was deleted meanwhile).
    """
    tenant = caller.tenant_id
    tracker = TaskTracker(store, caller.state.bus.redis)
    if task.workflow_id and task.root_task_id:
        # Already closed: the task documents are what is left to settle.
        await request_cancel(caller, task.workflow_id, closed_ok=True)
        await settle_run_tasks(
            store,
            tracker,
            tenant,
            task.workflow_id,
            run_status="canceled",
            error=f"cancelled by {caller.user_id}",
        )
    else:
        await tracker.transition(
            tenant, task.id, task.id, status="cancelled", error="cancelled before it ran"
        )
    return await store.find(tenant, task.id)
