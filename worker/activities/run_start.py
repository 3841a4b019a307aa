"""``record_run_start``: the run document and stream metadata of a scheduled run.

The gateway writes both when it starts a run itself (``gateway/runs/starter.py``).
A schedule's runs are started by Temporal, where no gateway code runs, so such a
run (``GraphRunInput.scheduled_by`` set) writes them as its first step. Both
writes are idempotent: ``create_run`` never undoes progress a node already
recorded, and a retry rewrites the same metadata.
"""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import activity

from spindle.shared.contracts.runs import RunStatus
from spindle.shared.store.run_document import RunRecord
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import RECORD_RUN_START, Empty, RunStart


class RunStartActivities(RunActivities):
    """Start bookkeeping of runs no gateway started, with the bus, archive and settings
    injected.

    Args:
        settings: the worker's settings (the Temporal UI link of the run document).
    """

    @activity.defn(name=RECORD_RUN_START)
    async def record_run_start(self, start: RunStart) -> Empty:
        """Write the run document and the stream's owner metadata, as a gateway start does."""
        run = start.run
        if self.archive is not None:
            now = datetime.now(UTC)
            settings = self.settings
            base = settings.temporal_ui_url.rstrip("/")
            await self.archive.create_run(
                RunRecord(
                    workflow_id=run.workflow_id,
                    run_id=run.run_id,
                    tenant_id=run.tenant_id,
                    user_id=start.user_id,
                    graph_name=run.graph_name,
                    status=RunStatus.RUNNING,
                    input=start.input,
                    context=start.context,
                    created_at=now,
                    updated_at=now,
                    temporal_ui_url=(
                        f"{base}/namespaces/{settings.temporal_namespace}"
                        f"/workflows/{run.workflow_id}/{run.run_id}/history"
                    ),
                )
            )
        await self.bus.set_meta(
            run.stream_id,
            {
                "run_id": run.run_id,
                "tenant_id": run.tenant_id,
                "user_id": start.user_id or "",
                "graph": run.graph_name,
            },
        )
        return Empty()
