"""The rules a task must keep: known executor, acyclic dependencies and tree,
references inside the caller's tenant, and who may change a task.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spindle.gateway.protocols.jsonrpc.registry import RpcContext
from spindle.gateway.protocols.jsonrpc.task_params import invalid
from spindle.shared.contracts.errors import CircularDependency, ExecutorNotFound, Forbidden
from spindle.shared.contracts.tasks import Task
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.platform.settings import Settings
from spindle.shared.tasks.store import MAX_TREE_TASKS, TaskStore


async def check_executor(ctx: RpcContext, executor: str | None, field: str) -> None:
    """Refuse an executor that no worker offers (-32003).

    An executor is a node type or, as the seed's ``{"schemas": {"method":
    "word_count"}}`` has it, a registered tool (its task's ``inputs`` are the
    tool's arguments; see ``spindle.shared.graphs.task_tree``).

    Raises:
        ExecutorNotFound: ``executor`` is neither a node type nor a tool of the catalog.
    """
    if executor is None:
        return
    catalog: Catalog = await ctx.state.catalog.get()
    if executor not in catalog.node_types and executor not in catalog.tools:
        known = ", ".join(sorted({*catalog.node_types, *catalog.tools}))
        raise ExecutorNotFound(
            f"executor {executor!r} not found (known: {known})",
            errors=[{"field": field, "reason": f"unknown executor {executor!r}"}],
        )


def may_control(ctx: RpcContext, user_id: str) -> bool:
    """The caller owns tasks of ``user_id``, or holds a role that controls the tenant's tasks."""
    settings: Settings = ctx.state.settings
    identity = ctx.identity
    return identity.user_id == user_id or identity.has_any_role(settings.run_control_roles)


def require_control(ctx: RpcContext, task: Task) -> None:
    """Refuse a change to another user's task unless the caller controls the tenant (-32004)."""
    if not may_control(ctx, task.user_id):
        raise Forbidden(f"task {task.id} belongs to another user")


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """A cycle in the directed graph ``edges`` (node → successors), or None.

    Iterative three-colour DFS so deep chains cannot overflow the stack.
    """
    white, grey, black = 0, 1, 2
    colour: dict[str, int] = {}
    for start in edges:
        if colour.get(start, white) != white:
            continue
        stack: list[tuple[str, list[str]]] = [(start, list(edges.get(start, ())))]
        path = [start]
        colour[start] = grey
        while stack:
            node, pending = stack[-1]
            if not pending:
                colour[node] = black
                stack.pop()
                path.pop()
                continue
            successor = pending.pop()
            state = colour.get(successor, white)
            if state == grey:
                return [*path[path.index(successor) :], successor]
            if state == white:
                colour[successor] = grey
                path.append(successor)
                stack.append((successor, list(edges.get(successor, ()))))
    return None


async def check_dependencies_acyclic(
    store: TaskStore, tenant_id: str, task_id: str, dependency_ids: list[str]
) -> None:
    """Refuse dependencies through which ``task_id`` would (transitively) depend on itself.

    Walks the stored dependency graph from the new dependencies; call it under
    ``store.graph_lock(tenant_id)`` so no concurrent change slips in between.

    Raises:
        CircularDependency: ``task_id`` is reachable from a dependency (-32002).
    """
    if task_id in dependency_ids:
        raise CircularDependency(
            f"task {task_id} cannot depend on itself",
            errors=[{"field": "dependencies", "reason": "a task cannot depend on itself"}],
        )
    seen: set[str] = set()
    frontier = list(dict.fromkeys(dependency_ids))
    while frontier:
        seen.update(frontier)
        if len(seen) > MAX_TREE_TASKS:
            raise invalid("dependencies", f"more than {MAX_TREE_TASKS} transitive dependencies")
        found = await store.find_many(tenant_id, frontier)
        following: list[str] = []
        for task in found.values():
            for dep in task.dependency_ids():
                if dep == task_id:
                    raise CircularDependency(
                        f"task {task_id} would depend on itself through {task.id}",
                        errors=[{"field": "dependencies", "reason": "circular dependency"}],
                    )
                if dep not in seen:
                    following.append(dep)
        frontier = list(dict.fromkeys(following))


def require_link(ctx: RpcContext, task: Task, field: str) -> None:
    """Refuse linking to another user's task unless the caller controls it (-32004).

    A child or a dependency joins the run of the task it links to: cancelling
    or failing it would end that run, so the link needs the right to control it.
    """
    if not may_control(ctx, task.user_id):
        raise Forbidden(
            f"{field}: task {task.id} belongs to another user; only its owner or a user "
            "with a run-control role may link tasks to it"
        )


async def check_parent(
    store: TaskStore,
    tenant_id: str,
    task_id: str | None,
    parent_id: str,
    field: str,
    *,
    ctx: RpcContext,
) -> Task:
    """The parent task, if it exists in the tenant, is not ``task_id`` or below
    it, and the caller may control it.

    Raises:
        ValidationFailed: the parent does not exist (-32602).
        Forbidden: the parent is another user's and the caller does not control it.
        CircularDependency: the parent is the task itself or one of its descendants.
    """
    parent = await store.find(tenant_id, parent_id)
    if parent is None:
        raise invalid(field, f"parent task {parent_id} not found")
    require_link(ctx, parent, field)
    if task_id is None:
        return parent
    ancestor: Task | None = parent
    hops = 0
    while ancestor is not None:
        if ancestor.id == task_id:
            raise CircularDependency(
                f"task {task_id} cannot be its own ancestor",
                errors=[
                    {"field": field, "reason": "the parent is the task or one of its descendants"}
                ],
            )
        hops += 1
        if ancestor.parent_id is None or hops > MAX_TREE_TASKS:
            break
        ancestor = await store.find(tenant_id, ancestor.parent_id)
    return parent


async def check_references_exist(
    store: TaskStore, tenant_id: str, dependency_ids: list[str], field: str, *, ctx: RpcContext
) -> None:
    """Refuse dependencies on tasks the tenant does not have (-32602), or on
    another user's tasks the caller does not control (-32004)."""
    found = await store.find_many(tenant_id, dependency_ids)
    for index, dep in enumerate(dependency_ids):
        if dep not in found:
            raise invalid(f"{field}[{index}].id", f"task {dep} not found")
        require_link(ctx, found[dep], f"{field}[{index}].id")
