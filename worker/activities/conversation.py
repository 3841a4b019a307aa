"""The ``Conversation`` workflow's activities: a run started, interrupted, rolled back.

The workflow (``spindle.worker.workflows.conversation``) decides; these do the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.service import RPCError, RPCStatusCode

from spindle.shared.contracts.conversations import (
    CONVERSATION_RUN_STARTED,
    INTERRUPT_RUN,
    ROLL_BACK_RUN,
    InterruptRun,
    RollBackRun,
    RunStartedInConversation,
)
from spindle.shared.contracts.run_end import EndedBy, EndedByKind
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.store.run_ends import RunEnds
from spindle.shared.tasks.webhooks import Webhooks
from spindle.shared.temporal.closed_runs import closed_run_data, reconcile_closed_run
from spindle.worker.contracts import Empty

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive, RunRecord

logger = logging.getLogger(__name__)


class ConversationActivities:
    """With the bus and archive injected."""

    def __init__(self, bus: MessageBus, archive: RunArchive | None) -> None:
        self.bus = bus
        self.archive = archive

    @activity.defn(name=CONVERSATION_RUN_STARTED)
    async def conversation_run_started(self, started: RunStartedInConversation) -> Empty:
        """A queued run has started: its stream and document learn its run id.

        The gateway wrote both when the run was submitted (status ``queued``);
        the run may already have recorded progress of its own, which is kept.
        """
        await self.bus.set_meta(started.workflow_id, {"run_id": started.run_id})
        if self.archive is not None:
            await self.archive.runs.update_one(
                {"_id": started.workflow_id, "status": RunStatus.QUEUED.value},
                {"$set": {"status": RunStatus.RUNNING.value}},
            )
            await self.archive.update_run(started.workflow_id, run_id=started.run_id)
        return Empty()

    @activity.defn(name=INTERRUPT_RUN)
    async def interrupt_run(self, interrupt: InterruptRun) -> Empty:
        """Cancel the run (it stops gracefully), noting first that ``interrupt.by``
        ends it: its error, ``ended_by`` and webhook name that run."""
        ended_by = EndedBy(kind=EndedByKind.RUN, id=interrupt.by, how="interrupted")
        await RunEnds(self.bus.redis).note(interrupt.workflow_id, ended_by)
        handle = activity.client().get_workflow_handle(interrupt.workflow_id)
        try:
            await handle.cancel(reason=ended_by.sentence("canceled"))
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            logger.info("run %s had already ended when interrupted", interrupt.workflow_id)
        return Empty()

    @activity.defn(name=ROLL_BACK_RUN)
    async def roll_back_run(self, rollback: RollBackRun) -> Empty:
        """Terminate the run, then end its stream with TERMINATED naming why."""
        client = activity.client()
        ended_by = EndedBy(kind=EndedByKind.RUN, id=rollback.by, how="rolled back")
        await RunEnds(self.bus.redis).note(rollback.workflow_id, ended_by)
        reason = ended_by.sentence("terminated")
        try:
            await client.get_workflow_handle(rollback.workflow_id).terminate(reason=reason)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            # Already closed: nothing to stop, the run keeps its own ending.
            logger.info("run %s had already ended when rolled back", rollback.workflow_id)
        await reconcile_closed_run(
            rollback.workflow_id,
            temporal=client,
            bus=self.bus,
            archive=self.archive,
            on_closed=self._closed_webhook,
        )
        return Empty()

    async def _closed_webhook(
        self, record: RunRecord | None, status: RunStatus, reason: str, ended_by: EndedBy
    ) -> None:
        """The rolled-back run's webhook hears of its end (it ran no finish_run)."""
        if record is not None:
            await Webhooks(self.bus.redis).notify(
                record.workflow_id,
                status.value,
                closed_run_data(record, status, reason, ended_by),
                occurrence="closed-outside",
            )


def conversation_activities(
    bus: MessageBus, archive: RunArchive | None
) -> list[Callable[..., Any]]:
    """The bound activities of ``Conversation`` workflows."""
    acts = ConversationActivities(bus, archive)
    return [acts.conversation_run_started, acts.interrupt_run, acts.roll_back_run]
