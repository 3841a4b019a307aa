"""The gateway's part in noticing runs Temporal closed without Spindle.

``spindle.shared.temporal.closed_runs`` does the work; this module wires it to
the gateway: the hook that settles a closed task run's tasks (as the REST
terminate route does), and the sweep the gateway process runs in the
background (``Settings.closed_run_sweep_seconds``).
"""

from __future__ import annotations

import logging
from typing import Any

from spindle.gateway.protocols.jsonrpc.task_execution import settle_terminated_run
from spindle.gateway.runs.children import cancel_children, open_children
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunRecord
from spindle.shared.temporal.closed_runs import ClosedRunSweep, OnClosed

log = logging.getLogger(__name__)


def settle_tasks_hook(state: Any) -> OnClosed:
    """``on_closed`` for the reconciler: the run's tasks (if any) end with it, and so
    do its open workstreams when Temporal closed it without running its code
    (terminate from the Temporal UI or CLI, a timeout): children are ABANDON."""

    async def settle(record: RunRecord | None, status: RunStatus, reason: str) -> None:
        if record is not None and status in (RunStatus.TERMINATED, RunStatus.TIMED_OUT):
            children = await open_children(state.temporal, record.workflow_id)
            await cancel_children(state.temporal, children)
        if record is None:
            return
        try:
            await settle_terminated_run(state, record.tenant_id, record.workflow_id, reason)
        except Exception as exc:
            log.error("run %s closed but its tasks were not updated: %s", record.workflow_id, exc)

    return settle


def closed_run_sweep(state: Any, settings: Settings) -> ClosedRunSweep | None:
    """The sweep of this gateway process; None when switched off or without an archive."""
    if settings.closed_run_sweep_seconds <= 0 or not settings.archive_enabled:
        return None
    return ClosedRunSweep(
        temporal=state.temporal,
        bus=state.bus,
        archive=state.archive,
        interval=settings.closed_run_sweep_seconds,
        batch=settings.closed_run_sweep_batch,
        on_closed=state.on_run_closed,
    )
