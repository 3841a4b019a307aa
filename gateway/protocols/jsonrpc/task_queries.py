"""Seed 003 task methods that read a tree or copy it: ``tasks.list``,
``tasks.tree``, ``tasks.children`` and ``tasks.copy``.
"""

from __future__ import annotations

from typing import Any

from spindle.gateway.protocols.jsonrpc.registry import RpcContext, task_store, tasks_method
from spindle.gateway.protocols.jsonrpc.task_methods import load_task
from spindle.gateway.protocols.jsonrpc.task_params import (
    ChildrenParams,
    CopyParams,
    ListParams,
    TaskIdParams,
    parse,
)
from spindle.shared.contracts.tasks import Task, TaskDependency, new_task_id


@tasks_method("tasks.list")
async def list_tasks(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """A page of the tenant's tasks (oldest first), filtered by status and user."""
    store = await task_store(ctx)
    parsed = parse(ListParams, params)
    tasks, total = await store.list_page(
        ctx.identity.tenant_id,
        user_id=parsed.user_id,
        status=parsed.status,
        limit=parsed.limit,
        offset=parsed.offset,
    )
    return {
        "tasks": [task.public() for task in tasks],
        "total": total,
        "limit": parsed.limit,
        "offset": parsed.offset,
    }


@tasks_method("tasks.tree")
async def tree(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """The task and all its descendants, nested ``{"task": ..., "children": [...]}``."""
    store = await task_store(ctx)
    root = await load_task(store, ctx, parse(TaskIdParams, params).task_id)
    below = await store.descendants(ctx.identity.tenant_id, root.id)
    by_parent: dict[str, list[Task]] = {}
    for task in below:
        by_parent.setdefault(task.parent_id or "", []).append(task)

    def node(task: Task) -> dict[str, Any]:
        return {"task": task.public(), "children": [node(c) for c in by_parent.get(task.id, [])]}

    return node(root)


@tasks_method("tasks.children")
async def children(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """The direct children of ``parent_id`` (not grandchildren)."""
    store = await task_store(ctx)
    parent = await load_task(store, ctx, parse(ChildrenParams, params).parent_id, "parent_id")
    found = await store.children(ctx.identity.tenant_id, parent.id)
    return {"children": [task.public() for task in found]}


def _fresh_copy(
    task: Task, *, new_id: str, parent_id: str | None, ids: dict[str, str], user_id: str
) -> Task:
    return Task(
        id=new_id,
        name=task.name,
        priority=task.priority,
        schemas=task.schemas,
        inputs=task.inputs,
        params=task.params,
        dependencies=[
            TaskDependency(id=ids.get(dep.id, dep.id), required=dep.required)
            for dep in task.dependencies
        ],
        parent_id=parent_id,
        user_id=user_id,
        tenant_id=task.tenant_id,
    )


@tasks_method("tasks.copy")
async def copy(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """Copy a task (and with ``copy_children`` its descendants) for re-execution.

    Copies get new UUIDs and a reset execution state (pending, no progress,
    result or error, no run link) and keep the definition: name, priority,
    inputs, params, schemas and dependencies (a dependency inside the copied
    tree points at the copy). The copied root keeps the original's parent;
    the copies belong to the caller.
    """
    store = await task_store(ctx)
    parsed = parse(CopyParams, params)
    tenant = ctx.identity.tenant_id
    async with store.graph_lock(tenant):
        original = await load_task(store, ctx, parsed.task_id)
        subtree = [original]
        if parsed.copy_children:
            subtree.extend(await store.descendants(tenant, original.id))
        ids = {task.id: new_task_id() for task in subtree}
        copies = [
            _fresh_copy(
                task,
                new_id=ids[task.id],
                parent_id=original.parent_id
                if task.id == original.id
                else ids.get(task.parent_id or "", task.parent_id),
                ids=ids,
                user_id=ctx.identity.user_id,
            )
            for task in subtree
        ]
        await store.insert_many(copies)
    return {
        "original_task_id": original.id,
        "copied_task_id": ids[original.id],
        "status": "pending",
        "copied_tasks": ids,
    }
