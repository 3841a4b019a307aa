"""Mirror a task run's node outcomes onto its seed 003 task documents.

Called from inside the node activities (``execute_node``, the prompt's
``request_input``/``accept_input``, the agent's ``llm_turn``) and from
``finish_run``: no extra activity per node. Runs that are not task runs (no
``meta["task_run"]``) cost nothing but a dict lookup; the finish of any run costs
one indexed query (tasks by ``workflow_id``). A failure here is logged and never
fails the node: the run's durable truth is Temporal's, the task documents follow it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from spindle.shared.graphs.task_tree import TaskRunMeta, node_id_of, task_run_meta
from spindle.shared.tasks.store import TaskStore, from_document
from spindle.shared.tasks.tracking import TaskTracker
from spindle.worker.contracts import NodeExecution, RunRef

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive

logger = logging.getLogger(__name__)


class TaskSync:
    """Task-document updates of the node and finish activities.

    Args:
        bus: the message bus (its Redis carries task events and push queues).
        archive: the archive (its database holds ``tasks``); None disables syncing.
    """

    def __init__(self, bus: MessageBus, archive: RunArchive | None) -> None:
        self._tracker = (
            TaskTracker(TaskStore(archive.database), bus.redis) if archive is not None else None
        )

    async def node_started(self, execution: NodeExecution) -> None:
        meta = task_run_meta(execution.state.get("meta"))
        if self._tracker is None or meta is None:
            return
        try:
            await self._tracker.node_started(execution.run.tenant_id, meta, execution.node.id)
        except Exception as exc:
            logger.warning("task of node %s: start not recorded: %s", execution.node.id, exc)

    async def node_finished(self, execution: NodeExecution, output: Any) -> None:
        meta = task_run_meta(execution.state.get("meta"))
        if self._tracker is None or meta is None:
            return
        try:
            await self._tracker.node_finished(
                execution.run.tenant_id, meta, execution.node.id, output
            )
        except Exception as exc:
            logger.warning("task of node %s: result not recorded: %s", execution.node.id, exc)

    async def run_finished(self, run: RunRef, *, status: str, error: str | None) -> None:
        if self._tracker is None or run.workstream_id != "main":
            return
        try:
            meta = await self._meta_of(run)
            if meta is not None:
                await self._tracker.run_finished(
                    run.tenant_id, meta, run_status=status, error=error
                )
        except Exception as exc:
            logger.warning("tasks of run %s: end not recorded: %s", run.workflow_id, exc)

    async def _meta_of(self, run: RunRef) -> TaskRunMeta | None:
        assert self._tracker is not None
        cursor = self._tracker.store.tasks.find(
            {"tenant_id": run.tenant_id, "workflow_id": run.workflow_id}
        )
        tasks = [from_document(doc) async for doc in cursor]
        roots = {t.root_task_id for t in tasks if t.root_task_id}
        if len(roots) != 1:
            return None
        ordered = sorted(tasks, key=lambda t: (t.priority, t.created_at or 0, t.id))
        return TaskRunMeta(
            root_task_id=roots.pop(),
            nodes={node_id_of(t.id): t.id for t in ordered},
            task_ids=[t.id for t in ordered],
        )
