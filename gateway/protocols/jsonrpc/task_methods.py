"""Seed 003 task methods that write: ``tasks.create``, ``tasks.update``,
``tasks.delete`` (and ``tasks.get``).

Every task belongs to the caller's tenant: another tenant's task is "task not
found" (-32001). Writes are atomic and guarded (see ``spindle.shared.tasks.store``);
changes to dependencies or the tree hold the tenant's graph lock so the cycle
check and the write see the same graph.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import Any

from spindle.gateway.protocols.jsonrpc.registry import RpcContext, task_store, tasks_method
from spindle.gateway.protocols.jsonrpc.task_params import (
    NULLABLE_UPDATES,
    DeleteParams,
    TaskDraft,
    TaskIdParams,
    TaskUpdates,
    TreeCreateParams,
    UpdateParams,
    invalid,
    parse,
    parse_draft,
    require_uuid,
    stored_dependencies,
)
from spindle.gateway.protocols.jsonrpc.task_rules import (
    check_dependencies_acyclic,
    check_executor,
    check_parent,
    check_references_exist,
    find_cycle,
    may_control,
    require_control,
)
from spindle.shared.contracts.errors import CircularDependency, Forbidden, NotFound, Unavailable
from spindle.shared.contracts.tasks import (
    CRITICAL_FIELDS,
    SERVER_FIELDS,
    Task,
    TaskDependency,
    new_task_id,
    normalize_dependencies,
)
from spindle.shared.tasks.store import TaskStore

# Optimistic retries of one update under contention before giving up.
MAX_UPDATE_ATTEMPTS = 200


def task_not_found(task_id: str) -> NotFound:
    return NotFound(f"task {task_id} not found")


async def load_task(
    store: TaskStore, ctx: RpcContext, task_id: str, field: str = "task_id"
) -> Task:
    """The caller's tenant's task ``task_id`` (-32602 for a bad id, -32001 if absent)."""
    require_uuid(task_id, field)
    task = await store.find(ctx.identity.tenant_id, task_id)
    if task is None:
        raise task_not_found(task_id)
    return task


def _owner(ctx: RpcContext, draft: TaskDraft, field: str) -> str:
    user_id = draft.user_id or ctx.identity.user_id
    if not may_control(ctx, user_id):
        raise Forbidden(f"{field}: only an admin may create tasks for another user")
    return user_id


@tasks_method("tasks.create")
async def create(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """Create one task, or a tree of tasks given as ``{"tasks": [...]}``."""
    store = await task_store(ctx)
    if "tasks" in params:
        return await _create_tree(params, ctx, store)
    draft = parse_draft(params)
    if draft.id is not None:
        raise invalid("id", "the server generates task ids; omit it")
    tenant = ctx.identity.tenant_id
    if draft.parent_id is not None:
        require_uuid(draft.parent_id, "parent_id")
    for index, dep in enumerate(draft.dependencies):
        require_uuid(dep.id, f"dependencies[{index}].id")
    dependencies = stored_dependencies(draft.dependencies)
    await check_executor(ctx, draft.schemas.method, "schemas.method")
    task = Task(
        id=new_task_id(),
        name=draft.name,
        priority=draft.priority,
        schemas=draft.schemas,
        inputs=draft.inputs,
        params=draft.params,
        dependencies=dependencies,
        parent_id=draft.parent_id,
        user_id=_owner(ctx, draft, "user_id"),
        tenant_id=tenant,
    )
    linked = draft.parent_id is not None or bool(dependencies)
    async with _graph_lock(store, tenant, linked):
        if draft.parent_id is not None:
            await check_parent(store, tenant, None, draft.parent_id, "parent_id", ctx=ctx)
        await check_references_exist(store, tenant, task.dependency_ids(), "dependencies", ctx=ctx)
        stored = await store.insert(task)
    return {"id": stored.id, "status": stored.status}


def _tree_drafts(params: dict[str, Any]) -> list[TaskDraft]:
    """The drafts of ``tasks.create`` with ``tasks`` (dependencies normalized first)."""
    raw = params.get("tasks")
    if isinstance(raw, list):
        params = {
            **params,
            "tasks": [
                {**m, "dependencies": normalize_dependencies(m["dependencies"])}
                if isinstance(m, dict) and "dependencies" in m
                else m
                for m in raw
            ],
        }
    return list(parse(TreeCreateParams, params).tasks)


def _fresh_ids(drafts: list[TaskDraft]) -> tuple[dict[str, str], list[str]]:
    """Client-side ``id`` → new task id, and each draft's new id in order."""
    refs: dict[str, str] = {}
    for index, draft in enumerate(drafts):
        if draft.id is not None:
            if draft.id in refs:
                raise invalid(f"tasks[{index}].id", f"duplicate id {draft.id!r}")
            refs[draft.id] = new_task_id()
    return refs, [refs[d.id] if d.id is not None else new_task_id() for d in drafts]


@dataclasses.dataclass
class _TreeLinks:
    """What a new tree points at outside itself (checked under the graph lock)."""

    external: set[str] = dataclasses.field(default_factory=set)
    external_parents: list[tuple[str, str]] = dataclasses.field(default_factory=list)


async def _draft_task(
    ctx: RpcContext,
    draft: TaskDraft,
    index: int,
    *,
    task_id: str,
    refs: dict[str, str],
    links: _TreeLinks,
) -> Task:
    where = f"tasks[{index}]"
    parent_id = None
    if draft.parent_id is not None:
        parent_id = refs.get(draft.parent_id)
        if parent_id is None:
            parent_id = require_uuid(draft.parent_id, f"{where}.parent_id")
            links.external_parents.append((parent_id, f"{where}.parent_id"))
    dependencies: list[TaskDependency] = []
    for dep_index, dep in enumerate(draft.dependencies):
        dep_id = refs.get(dep.id)
        if dep_id is None:
            dep_id = require_uuid(dep.id, f"{where}.dependencies[{dep_index}].id")
            links.external.add(dep_id)
        dependencies.append(TaskDependency(id=dep_id, required=dep.required))
    await check_executor(ctx, draft.schemas.method, f"{where}.schemas.method")
    return Task(
        id=task_id,
        name=draft.name,
        priority=draft.priority,
        schemas=draft.schemas,
        inputs=draft.inputs,
        params=draft.params,
        dependencies=dependencies,
        parent_id=parent_id,
        user_id=_owner(ctx, draft, f"{where}.user_id"),
        tenant_id=ctx.identity.tenant_id,
    )


def _refuse_cycles(tasks: list[Task]) -> None:
    # New tasks only point at each other or at stored tasks (which never point
    # back at new ones), so any cycle lies within the batch.
    for relation, edges in (
        ("parent_id", {t.id: [t.parent_id] if t.parent_id else [] for t in tasks}),
        ("dependencies", {t.id: t.dependency_ids() for t in tasks}),
    ):
        cycle = find_cycle(edges)
        if cycle is not None:
            raise CircularDependency(
                f"circular {relation}: {' -> '.join(cycle)}",
                errors=[{"field": f"tasks.{relation}", "reason": "circular dependency"}],
            )


async def _create_tree(params: dict[str, Any], ctx: RpcContext, store: TaskStore) -> dict[str, Any]:
    drafts = _tree_drafts(params)
    tenant = ctx.identity.tenant_id
    refs, ids = _fresh_ids(drafts)
    links = _TreeLinks()
    tasks = [
        await _draft_task(ctx, draft, index, task_id=ids[index], refs=refs, links=links)
        for index, draft in enumerate(drafts)
    ]
    _refuse_cycles(tasks)
    async with store.graph_lock(tenant):
        for parent_id, where in links.external_parents:
            await check_parent(store, tenant, None, parent_id, where, ctx=ctx)
        await check_references_exist(store, tenant, sorted(links.external), "dependencies", ctx=ctx)
        stored = await store.insert_many(tasks)
    reverse = {new: ref for ref, new in refs.items()}
    roots = [t for t in stored if t.parent_id is None or t.parent_id not in set(ids)]
    return {
        "id": roots[0].id if roots else stored[0].id,
        "status": "pending",
        "tasks": [
            {"id": t.id, "ref": reverse.get(t.id), "name": t.name, "status": t.status}
            for t in stored
        ],
    }


@tasks_method("tasks.get")
async def get(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """The complete task object."""
    store = await task_store(ctx)
    task = await load_task(store, ctx, parse(TaskIdParams, params).task_id)
    return task.public()


def _graph_lock(store: TaskStore, tenant: str, needed: bool) -> AbstractAsyncContextManager[None]:
    return store.graph_lock(tenant) if needed else nullcontext()


def _check_update_keys(updates: dict[str, Any]) -> TaskUpdates:
    if not updates:
        raise invalid("updates", "no fields to update")
    for key, value in updates.items():
        if key in SERVER_FIELDS:
            raise invalid(f"updates.{key}", "set by the server; it cannot be updated")
        if value is None and key not in NULLABLE_UPDATES:
            raise invalid(f"updates.{key}", "must not be null")
    body = dict(updates)
    if "dependencies" in body:
        body["dependencies"] = normalize_dependencies(body["dependencies"])
    return parse(TaskUpdates, body, "updates")


@tasks_method("tasks.update")
async def update(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """Update fields of a task, atomically (version-guarded, retried under contention)."""
    store = await task_store(ctx)
    parsed = parse(UpdateParams, params)
    require_uuid(parsed.task_id, "task_id")
    changes = _check_update_keys(parsed.updates)
    keys = set(parsed.updates)
    fields: dict[str, Any] = {key: getattr(changes, key) for key in keys}
    if changes.schemas is not None:
        fields["schemas"] = changes.schemas.model_dump(mode="json")
        await check_executor(ctx, changes.schemas.method, "updates.schemas.method")
    dependencies: list[str] = []
    if changes.dependencies is not None:
        for index, dep in enumerate(changes.dependencies):
            require_uuid(dep.id, f"updates.dependencies[{index}].id")
        fields["dependencies"] = [d.model_dump() for d in stored_dependencies(changes.dependencies)]
        dependencies = [dep.id for dep in changes.dependencies]
    if changes.parent_id is not None:
        require_uuid(changes.parent_id, "updates.parent_id")
    tenant = ctx.identity.tenant_id
    graph_change = "dependencies" in keys or "parent_id" in keys
    async with _graph_lock(store, tenant, graph_change):
        for _ in range(MAX_UPDATE_ATTEMPTS):
            task = await store.find(tenant, parsed.task_id)
            if task is None:
                raise task_not_found(parsed.task_id)
            require_control(ctx, task)
            _check_critical(task, fields)
            if "user_id" in keys and not may_control(ctx, fields["user_id"]):
                raise Forbidden("updates.user_id: only an admin may give a task to another user")
            if "dependencies" in keys:
                await check_references_exist(
                    store, tenant, dependencies, "updates.dependencies", ctx=ctx
                )
                await check_dependencies_acyclic(store, tenant, task.id, dependencies)
            if fields.get("parent_id") is not None:
                await check_parent(
                    store, tenant, task.id, fields["parent_id"], "updates.parent_id", ctx=ctx
                )
            updated = await store.update_guarded(
                tenant, task.id, version=task.version, fields=fields
            )
            if updated is not None:
                return updated.public()
    raise Unavailable(f"task {parsed.task_id} is too busy to update; retry", retry_after=1)


def _check_critical(task: Task, fields: dict[str, Any]) -> None:
    if task.status != "in_progress":
        return
    for key in sorted(CRITICAL_FIELDS & fields.keys()):
        if fields[key] != getattr(task, key):
            raise invalid(f"updates.{key}", "cannot be changed while the task is in_progress")


@tasks_method("tasks.delete")
async def delete(params: dict[str, Any], ctx: RpcContext) -> dict[str, Any]:
    """Delete a pending task (and, with ``cascade``, its pending descendants)."""
    store = await task_store(ctx)
    parsed = parse(DeleteParams, params)
    tenant = ctx.identity.tenant_id
    async with store.graph_lock(tenant):
        task = await load_task(store, ctx, parsed.task_id)
        require_control(ctx, task)
        doomed = [task]
        children = await store.children(tenant, task.id)
        if children and not parsed.cascade:
            raise invalid(
                "task_id",
                f"the task has {len(children)} children: delete them first or pass cascade=true",
            )
        if parsed.cascade:
            doomed.extend(await store.descendants(tenant, task.id))
        doomed_ids = {t.id for t in doomed}
        for candidate in doomed:
            if candidate.status != "pending":
                raise invalid(
                    "task_id",
                    "only pending tasks can be deleted "
                    f"(task {candidate.id} is {candidate.status})",
                )
            require_control(ctx, candidate)
            outside = [d.id for d in await store.dependents(tenant, candidate.id)]
            outside = [d for d in outside if d not in doomed_ids]
            if outside:
                raise invalid(
                    "task_id",
                    f"task {candidate.id} has dependents ({', '.join(outside)}): "
                    "remove the dependencies first",
                )
        deleted: list[str] = []
        # Leaves first, so a failure midway never leaves an orphaned child.
        for candidate in reversed(doomed):
            if not await store.delete_if(tenant, candidate.id, status="pending"):
                raise invalid(
                    "task_id", f"task {candidate.id} left pending while being deleted; retry"
                )
            deleted.append(candidate.id)
    return {"success": True, "deleted": deleted}
