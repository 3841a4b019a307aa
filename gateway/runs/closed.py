"""The gateway's part in noticing runs Temporal closed without Spindle.

``spindle.shared.temporal.closed_runs`` does the work; this module wires it to
the gateway: the hook that settles a closed task run's tasks (as the REST
terminate route does), and the sweep the gateway process runs in the
background (``Settings.closed_run_sweep_seconds``).
"""

from __future__ import annotations

import logging

from temporalio.client import Client

from spindle.gateway.runs.children import cancel_children, open_children
from spindle.gateway.runs.task_runs import settle_terminated_run
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.run_end import EndedBy
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.tasks.store import TaskStore
from spindle.shared.tasks.webhooks import Webhooks
from spindle.shared.temporal.closed_runs import ClosedRunSweep, OnClosed, closed_run_data

log = logging.getLogger(__name__)


def settle_tasks_hook(temporal: Client, bus: MessageBus, tasks: TaskStore) -> OnClosed:
    """``on_closed`` for the reconciler: the run's tasks (if any) end with it, so do
    its open workstreams when Temporal closed it without running its code (terminate
    from the Temporal UI or CLI, a timeout: children are ABANDON), and its webhook
    (``shared.tasks.webhooks``) gets the event."""

    async def settle(
        record: RunRecord | None, status: RunStatus, reason: str, ended_by: EndedBy
    ) -> None:
        if record is not None and status in (RunStatus.TERMINATED, RunStatus.TIMED_OUT):
            children = await open_children(temporal, record.workflow_id)
            await cancel_children(temporal, children)
        if record is None:
            return
        try:
            await settle_terminated_run(
                tasks, bus.redis, record.tenant_id, record.workflow_id, reason
            )
        except Exception as exc:
            log.error("run %s closed but its tasks were not updated: %s", record.workflow_id, exc)
        # No finish_run ran, so the run's webhook hears of its end from here (once:
        # this hook runs only for the caller that stored the closing message).
        data = closed_run_data(record, status, reason, ended_by)
        try:
            await Webhooks(bus.redis).notify(
                record.workflow_id, status.value, data, occurrence="closed-outside"
            )
        except Exception as exc:
            log.error("run %s closed but its webhook was not queued: %s", record.workflow_id, exc)

    return settle


def closed_run_sweep(
    settings: Settings,
    *,
    temporal: Client,
    bus: MessageBus,
    archive: RunArchive,
    on_closed: OnClosed,
) -> ClosedRunSweep | None:
    """The sweep of this gateway process (run documents, then runs with open prompts);
    None when switched off or without an archive."""
    if settings.closed_run_sweep_seconds <= 0 or not settings.archive_enabled:
        return None
    return ClosedRunSweep(
        temporal=temporal,
        bus=bus,
        archive=archive,
        interval=settings.closed_run_sweep_seconds,
        batch=settings.closed_run_sweep_batch,
        on_closed=on_closed,
    )
