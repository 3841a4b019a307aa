"""Task documents follow their graph run: each transition written, then announced.

Used by the worker (inside the node activity and the run's finish activity, so
no extra activity per node) and by the gateway (``tasks.execute`` and
``tasks.cancel``). Every transition is a guarded single-document write
(``TaskStore.update_fields`` with ``expect_status``): a task already in a
terminal status is never overwritten, so a late node completion cannot undo a
cancel. An event is published (``spindle.shared.tasks.events``) and queued for push
(``spindle.shared.tasks.push``) only when the write took effect.

The root task stays ``in_progress`` until the run ends; its progress is the
fraction of the tree's tasks completed; its final status and error are the
run's, its result its own executor's output or else the tree's results by task id.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from spindle.shared.contracts.tasks import TERMINAL_STATUSES
from spindle.shared.graphs.task_tree import TaskRunMeta
from spindle.shared.tasks.events import TaskEvent, TaskEventLog, progress_event, status_event
from spindle.shared.tasks.push import PushOutbox

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient
    from spindle.shared.tasks.store import TaskStore

logger = logging.getLogger(__name__)

ACTIVE_STATUSES = ("pending", "in_progress")
# RunStatus value → task status.
TASK_STATUS_OF_RUN = {
    "completed": "completed",
    "failed": "failed",
    "timed_out": "failed",
    "canceled": "cancelled",
    "terminated": "cancelled",
}
_FAILED_NODE = re.compile(r"^node '([^']+)' \([^)]*\) failed: (.*)$", re.DOTALL)


class TaskTracker:
    """Writes task transitions of one tenant's runs and publishes their events.

    Args:
        store: the task store.
        redis: the bus's Redis client (event log and push queue).
    """

    def __init__(self, store: TaskStore, redis: RedisClient) -> None:
        self.store = store
        self.events = TaskEventLog(redis)
        self.push = PushOutbox(redis)

    async def publish(self, event: TaskEvent) -> None:
        """Append ``event`` to its tree's log and queue it for push (best-effort)."""
        try:
            await self.events.append(event)
            await self.push.enqueue(event)
        except Exception as exc:
            logger.warning(
                "task %s: event %s not published: %s", event.data.task_id, event.event, exc
            )

    async def transition(
        self,
        tenant_id: str,
        task_id: str,
        root_task_id: str,
        *,
        status: str,
        progress: float | None = None,
        result: Any = None,
        error: str | None = None,
        expect: tuple[str, ...] = ACTIVE_STATUSES,
        extra: dict[str, Any] | None = None,
    ) -> bool:
        """Move a task to ``status`` if it is in one of ``expect``; announce it."""
        fields: dict[str, Any] = {"status": status, **(extra or {})}
        if progress is not None:
            fields["progress"] = progress
        stamp: list[str] = []
        if status == "in_progress":
            stamp.append("started_at")
        if status in TERMINAL_STATUSES:
            fields["result"] = result
            fields["error"] = error
            stamp.append("completed_at")
        task = await self.store.update_fields(
            tenant_id, task_id, fields, expect_status=expect, stamp=stamp
        )
        if task is None:
            return False
        await self.publish(
            status_event(
                task_id=task.id,
                root_task_id=root_task_id,
                status=task.status,
                progress=task.progress,
                result=task.result,
                error=task.error,
            )
        )
        return True

    # -- node outcomes (worker, inside the node's own activity) ------------------

    async def node_started(self, tenant_id: str, meta: TaskRunMeta, node_id: str) -> None:
        task_id = meta.nodes.get(node_id)
        if task_id is None or task_id == meta.root_task_id:
            return
        await self.transition(
            tenant_id, task_id, meta.root_task_id, status="in_progress", expect=("pending",)
        )

    async def node_finished(
        self, tenant_id: str, meta: TaskRunMeta, node_id: str, output: Any
    ) -> None:
        task_id = meta.nodes.get(node_id)
        if task_id is None:
            return
        if task_id == meta.root_task_id:
            # The root ends with the run; keep its own output meanwhile.
            await self.store.update_fields(
                tenant_id, task_id, {"result": output}, expect_status=ACTIVE_STATUSES
            )
        else:
            await self.transition(
                tenant_id,
                task_id,
                meta.root_task_id,
                status="completed",
                progress=1.0,
                result=output,
            )
        await self._root_progress(tenant_id, meta)

    async def _root_progress(self, tenant_id: str, meta: TaskRunMeta) -> None:
        total = len(meta.task_ids)
        if not total:
            return
        done = await self.store.tasks.count_documents(
            {"tenant_id": tenant_id, "_id": {"$in": meta.task_ids}, "status": "completed"}
        )
        # The root counts once the run completed, so a running tree is never at 1.0.
        progress = round(min(done, total - 1) / total, 4)
        root = await self.store.update_fields(
            tenant_id,
            meta.root_task_id,
            {"progress": progress},
            expect_status=ACTIVE_STATUSES,
        )
        if root is not None:
            await self.publish(
                progress_event(
                    task_id=root.id,
                    root_task_id=root.id,
                    status=root.status,
                    progress=root.progress,
                )
            )

    # -- run end (worker's finish activity, gateway's cancel) ---------------------

    async def run_finished(
        self,
        tenant_id: str,
        meta: TaskRunMeta,
        *,
        run_status: str,
        error: str | None = None,
    ) -> None:
        """Give every task still active its end, the root last (its event ends the stream)."""
        status = TASK_STATUS_OF_RUN.get(run_status, "failed")
        failed_task, cause = self._failed_task(meta, error) if status == "failed" else (None, None)
        if failed_task is not None:
            error = f"task {failed_task} failed: {cause}"
        cursor = self.store.tasks.find(
            {
                "tenant_id": tenant_id,
                "_id": {"$in": meta.task_ids},
                "status": {"$in": ACTIVE_STATUSES},
            },
            {"_id": 1},
        )
        active = {str(doc["_id"]) async for doc in cursor}
        for task_id in meta.task_ids:
            if task_id == meta.root_task_id or task_id not in active:
                continue
            if task_id == failed_task:
                await self.transition(
                    tenant_id, task_id, meta.root_task_id, status="failed", error=cause
                )
            elif status == "completed":
                # A node whose executor reports no task outcome of its own.
                await self.transition(
                    tenant_id, task_id, meta.root_task_id, status="completed", progress=1.0
                )
            else:
                reason = "the run was cancelled" if status == "cancelled" else f"run {status}"
                await self.transition(
                    tenant_id, task_id, meta.root_task_id, status="cancelled", error=reason
                )
        await self.transition(
            tenant_id,
            meta.root_task_id,
            meta.root_task_id,
            status=status,
            progress=1.0 if status == "completed" else None,
            result=await self._root_result(tenant_id, meta),
            error=error,
        )

    async def _root_result(self, tenant_id: str, meta: TaskRunMeta) -> Any:
        """The root's own executor output, or else its tree's results by task id."""
        tasks = await self.store.find_many(tenant_id, meta.task_ids)
        root = tasks.get(meta.root_task_id)
        if root is not None and root.result is not None:
            return root.result
        return {
            task_id: tasks[task_id].result
            for task_id in meta.task_ids
            if task_id in tasks
            and task_id != meta.root_task_id
            and tasks[task_id].status == "completed"
        }

    @staticmethod
    def _failed_task(meta: TaskRunMeta, error: str | None) -> tuple[str | None, str | None]:
        # GraphRun's error names the failed node: "node '<id>' (<type>) failed: <cause>".
        match = _FAILED_NODE.match(error or "")
        if match is None:
            return None, None
        return meta.nodes.get(match.group(1)), match.group(2)
