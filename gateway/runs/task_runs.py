"""The tasks of a run that ended outside the worker (seed 003 task runs).

A cancelled run's worker settles its tasks itself; a terminated run runs no more
code, so ``tasks.cancel``, the terminate operation (``spindle.gateway.services.run_control``)
and the closed-run hook (``spindle.gateway.runs.closed``) settle them here.
"""

from __future__ import annotations

from spindle.shared.graphs.task_tree import TaskRunMeta, node_id_of
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.tasks.store import TaskStore
from spindle.shared.tasks.tracking import TaskTracker


async def settle_run_tasks(
    store: TaskStore,
    tracker: TaskTracker,
    tenant_id: str,
    workflow_id: str,
    *,
    run_status: str,
    error: str | None,
) -> None:
    """Give the tasks of a run that ended outside the worker their end (root last)."""
    members = await store.run_members(tenant_id, workflow_id)
    roots = {doc.get("root_task_id") for doc in members if doc.get("root_task_id")}
    if len(roots) != 1:
        return  # not a task run
    ids = [str(doc["_id"]) for doc in members]
    meta = TaskRunMeta(
        root_task_id=str(roots.pop()), nodes={node_id_of(i): i for i in ids}, task_ids=ids
    )
    await tracker.run_finished(tenant_id, meta, run_status=run_status, error=error)


async def settle_terminated_run(
    store: TaskStore, redis: RedisClient, tenant_id: str, workflow_id: str, reason: str
) -> None:
    """A terminated run's tasks (if it is a task run) become cancelled."""
    tracker = TaskTracker(store, redis)
    await settle_run_tasks(
        store, tracker, tenant_id, workflow_id, run_status="terminated", error=reason
    )
