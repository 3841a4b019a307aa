"""The ``Conversation`` workflow's activities: a run started, a run rolled back.

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
    ROLL_BACK_RUN,
    RollBackRun,
    RunStartedInConversation,
)
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.temporal.closed_runs import reconcile_closed_run
from spindle.worker.contracts import Empty

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive

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

    @activity.defn(name=ROLL_BACK_RUN)
    async def roll_back_run(self, rollback: RollBackRun) -> Empty:
        """Terminate the run, then end its stream with TERMINATED naming why."""
        client = activity.client()
        reason = f"rolled back by run {rollback.by}"
        try:
            await client.get_workflow_handle(rollback.workflow_id).terminate(reason=reason)
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            # Already closed: nothing to stop, the run keeps its own ending.
            logger.info("run %s had already ended when rolled back", rollback.workflow_id)
        await reconcile_closed_run(
            rollback.workflow_id, temporal=client, bus=self.bus, archive=self.archive
        )
        return Empty()


def conversation_activities(
    bus: MessageBus, archive: RunArchive | None
) -> list[Callable[..., Any]]:
    """The bound activities of ``Conversation`` workflows."""
    acts = ConversationActivities(bus, archive)
    return [acts.conversation_run_started, acts.roll_back_run]
