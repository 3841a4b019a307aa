"""A seed 003 task tree as a graph run: tasks → nodes, dependencies → edges.

``tasks.execute`` runs a whole tree as ONE ``GraphRun``. Rules of the mapping:

- Each task becomes a node ``t_<task id>``. Its executor ``schemas.method`` is a
  node type of the catalog (params: the task's ``params`` with its ``inputs``
  merged over them; for ``tool``, ``params.tool`` names the tool and ``inputs``
  are its arguments) or the name of a catalog tool (a ``tool`` node whose
  ``args`` are the merged params/inputs). A task without an executor is a
  pass-through step (a local ``output`` node). Anything else is -32003.
- ``dependencies`` become edges (dependency → dependent); a cycle is -32002,
  a dependency outside the executed tree is -32602. ``parent_id`` organizes the
  tree; it does not order execution (as in aipartnerupflow).
- Priorities: 0 is the highest, 3 the lowest. The scheduler hands out every
  ready node at once, in the order of the edges that made them ready, and the
  workflow schedules their activities in that order. So edges are sorted by
  the priority of their target (and nodes listed by priority): among tasks that
  become ready together, the higher priority one is scheduled first. Ready
  tasks are never held back for priority (they run concurrently).
- Tasks with no dependency hang off a synthetic local ``output`` entry node,
  unless exactly one task has none (that task is the entry).

The run carries ``node → task`` in ``GraphRunInput.meta[TASK_RUN_META]`` so the
worker can mirror each node's outcome onto its task document.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from spindle.shared.contracts.errors import (
    CircularDependency,
    ExecutorNotFound,
    GraphInvalid,
    ValidationFailed,
)
from spindle.shared.contracts.graph_spec import EdgeSpec, GraphSpec, NodeSpec
from spindle.shared.contracts.tasks import Task
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.node_types import OUTPUT, TOOL
from spindle.shared.graphs.validation import validate_graph

TASK_RUN_META = "task_run"
ENTRY_NODE_ID = "tasks_start"
NODE_PREFIX = "t_"
PASS_THROUGH_TYPE = OUTPUT.name


class TaskRunMeta(BaseModel):
    """What a task run's workflow carries about its tasks (``meta["task_run"]``)."""

    root_task_id: str
    nodes: dict[str, str] = Field(default_factory=dict, description="node id → task id")
    task_ids: list[str] = Field(default_factory=list, description="every task of the run")


class TaskGraph(BaseModel):
    """The graph of a task tree and the mapping between its nodes and tasks."""

    spec: GraphSpec
    meta: TaskRunMeta

    def task_of(self, node_id: str) -> str | None:
        return self.meta.nodes.get(node_id)


def node_id_of(task_id: str) -> str:
    """The node id of a task (task ids are UUIDs, which may start with a digit)."""
    return f"{NODE_PREFIX}{task_id}"


def task_run_meta(meta: dict[str, Any] | None) -> TaskRunMeta | None:
    """The task mapping of a run's meta, or None for runs that are not task runs."""
    raw = (meta or {}).get(TASK_RUN_META)
    if not isinstance(raw, dict):
        return None
    try:
        return TaskRunMeta.model_validate(raw)
    except ValueError:
        return None


def _fail(task: Task | None, field: str, reason: str) -> dict[str, Any]:
    where = f"task '{task.id}': " if task else ""
    return {
        "task_id": task.id if task else None,
        "field": field,
        "reason": reason,
        "message": f"{where}{field}: {reason}",
    }


def _node_of(task: Task, catalog: Catalog) -> NodeSpec:
    method = task.executor
    merged = {**task.params, **task.inputs}
    node_id = node_id_of(task.id)
    label = task.name[:200]
    if method is None:
        # Outputs nothing, so a grouping root's result is its tree's results.
        return NodeSpec(
            id=node_id,
            type=PASS_THROUGH_TYPE,
            label=label,
            params={"select": "`null`"},
            local=True,
        )
    if method == TOOL.name and "args" not in task.inputs:
        # A tool executor's runtime inputs are the tool's arguments.
        args = {**(task.params.get("args") or {}), **task.inputs}
        return NodeSpec(
            id=node_id, type=TOOL.name, label=label, params={**task.params, "args": args}
        )
    if method in catalog.node_types:
        return NodeSpec(id=node_id, type=method, label=label, params=merged)
    if method in catalog.tools:
        return NodeSpec(
            id=node_id, type=TOOL.name, label=label, params={"tool": method, "args": merged}
        )
    known = sorted({*catalog.node_types, *catalog.tools})
    raise ExecutorNotFound(
        f"Executor not found: task '{task.id}' names executor '{method}'",
        errors=[
            _fail(
                task,
                "schemas.method",
                f"unknown executor '{method}' (known: {', '.join(known) or 'none'})",
            )
        ],
    )


def find_cycle(tasks: Sequence[Task]) -> list[str] | None:
    """Task ids along one dependency cycle (first id repeated at the end), or None."""
    deps = {t.id: [d for d in t.dependency_ids() if d != t.id] for t in tasks}
    for t in tasks:
        if t.id in t.dependency_ids():
            return [t.id, t.id]
    state: dict[str, int] = {}
    for start in deps:
        if state.get(start):
            continue
        path: list[str] = [start]
        stack: list[tuple[str, int]] = [(start, 0)]
        state[start] = 1
        while stack:
            node, pos = stack[-1]
            children = [d for d in deps.get(node, []) if d in deps]
            if pos < len(children):
                stack[-1] = (node, pos + 1)
                child = children[pos]
                if state.get(child) == 1:
                    return [*path[path.index(child) :], child]
                if not state.get(child):
                    state[child] = 1
                    stack.append((child, 0))
                    path.append(child)
            else:
                state[node] = 2
                stack.pop()
                path.pop()
    return None


def check_dependencies(tasks: Sequence[Task]) -> None:
    """Refuse dependencies on tasks outside ``tasks`` (-32602) and cycles (-32002)."""
    ids = {t.id for t in tasks}
    errors = [
        _fail(t, "dependencies", f"depends on task '{dep}' that is not part of the executed tree")
        for t in tasks
        for dep in t.dependency_ids()
        if dep not in ids
    ]
    if errors:
        raise ValidationFailed("; ".join(e["message"] for e in errors), errors=errors)
    cycle = find_cycle(tasks)
    if cycle is not None:
        chain = " → ".join(cycle)
        raise CircularDependency(
            f"Circular dependency detected: {chain}",
            errors=[{"field": "dependencies", "reason": f"cycle {chain}", "cycle": cycle}],
        )


def build_task_graph(tasks: Sequence[Task], catalog: Catalog, *, root_task_id: str) -> TaskGraph:
    """Turn a task tree into a validated graph spec.

    Args:
        tasks: every task to execute (the root and its descendants).
        catalog: the workers' catalog (built-in node types are always known).
        root_task_id: the tree's root; names the graph.

    Raises:
        ValidationFailed: a dependency outside the tree, or a node's params are
            invalid for its executor (``errors`` name task, field and reason).
        CircularDependency: the dependencies form a cycle.
        ExecutorNotFound: a task's ``schemas.method`` is no known executor.
    """
    if not tasks:
        raise ValidationFailed(
            "nothing to execute", errors=[{"field": "tasks", "reason": "no task given"}]
        )
    check_dependencies(tasks)
    full = Catalog.builtin().merged(catalog)
    order = sorted(range(len(tasks)), key=lambda i: (tasks[i].priority, i))
    ranked = [tasks[i] for i in order]
    rank = {t.id: r for r, t in enumerate(ranked)}
    nodes = [_node_of(t, full) for t in ranked]

    edges: list[tuple[int, EdgeSpec]] = []
    roots = [t for t in ranked if not t.dependencies]
    for t in ranked:
        for dep in t.dependency_ids():
            edges.append(
                (
                    rank[t.id],
                    EdgeSpec.model_validate({"from": node_id_of(dep), "to": node_id_of(t.id)}),
                )
            )
    if len(roots) == 1:
        entry = node_id_of(roots[0].id)
    else:
        entry = ENTRY_NODE_ID
        nodes.insert(
            0,
            NodeSpec(
                id=ENTRY_NODE_ID,
                type=PASS_THROUGH_TYPE,
                label="start",
                params={"select": "input"},
                local=True,
            ),
        )
        for t in roots:
            edges.append(
                (
                    rank[t.id],
                    EdgeSpec.model_validate({"from": ENTRY_NODE_ID, "to": node_id_of(t.id)}),
                )
            )
    # Stable sort by target priority: the scheduler activates in edge order.
    edges.sort(key=lambda pair: pair[0])
    spec = GraphSpec(
        name=f"tasks-{root_task_id}",
        description="seed 003 task tree",
        entry=entry,
        nodes=nodes,
        edges=[e for _, e in edges],
    )
    _validate(spec, catalog, {node_id_of(t.id): t for t in tasks})
    meta = TaskRunMeta(
        root_task_id=root_task_id,
        nodes={node_id_of(t.id): t.id for t in tasks},
        task_ids=[t.id for t in ranked],
    )
    return TaskGraph(spec=spec, meta=meta)


def _validate(spec: GraphSpec, catalog: Catalog, by_node: dict[str, Task]) -> None:
    try:
        validate_graph(spec, catalog)
    except (ExecutorNotFound, GraphInvalid) as exc:
        errors = []
        for err in exc.errors:
            task = by_node.get(str(err.get("node")))
            field = str(err.get("field") or err.get("rule") or "schemas")
            if task is not None and field.startswith("params"):
                # Node params come from the task's params/inputs.
                field = "inputs" + field[len("params") :]
            errors.append(_fail(task, field, str(err.get("message", ""))))
        raise type(exc)(exc.detail, errors=errors) from exc
