"""``record_run_start``: the run document and stream metadata of a scheduled run.

The gateway writes both when it starts a run itself (``gateway/runs/starter.py``).
A schedule's runs are started by Temporal, where no gateway code runs, so such a
run (``GraphRunInput.scheduled_by`` set) writes them as its first step. Both
writes are idempotent: ``create_run`` never undoes progress a node already
recorded, and a retry rewrites the same metadata.

It also takes the run's run-start permit (``rate_limit_run_starts``, the limiter the
gateway's doors use: ``shared/platform/run_start_permits.py``), or uses one the
gateway's trigger or backfill prepaid. The answer is the activity's result, so it is
recorded in the run's history: a run over the limit is refused once and for all, runs
none of its nodes and ends ``failed`` naming the setting (docs/schedules.md). The
decision is kept per run in Redis, so a retry never takes a second permit.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cached_property

from temporalio import activity

from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform.run_start_permits import RunStartPermits
from spindle.shared.store.run_document import RunRecord
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import RECORD_RUN_START, RunStart, RunStartAdmission


class RunStartActivities(RunActivities):
    """Start bookkeeping of runs no gateway started, with the bus, archive and settings
    injected.

    Args:
        settings: the worker's settings (the Temporal UI link of the run document).
    """

    @cached_property
    def permits(self) -> RunStartPermits:
        """Run-start permits in the bus's Redis, where the gateway counts them too."""
        return RunStartPermits(self.bus.redis)

    @activity.defn(name=RECORD_RUN_START)
    async def record_run_start(self, start: RunStart) -> RunStartAdmission:
        """Take the run's run-start permit, then write the run document and the stream's
        owner metadata, as a gateway start does (also for a refused run: its end is
        recorded on them)."""
        admission = await self._admit(start)
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
        return admission

    async def _admit(self, start: RunStart) -> RunStartAdmission:
        """One permit of the tenant's ``rate_limit_run_starts`` (idempotent per run).

        Raises:
            redis.exceptions.RedisError, OSError: Redis cannot be reached (the
                activity retries; it writes the stream metadata to Redis anyway).
        """
        if start.scheduled_by is None:  # started before permits were taken here
            return RunStartAdmission()
        run = start.run
        per_minute = self.settings.rate_limit_run_starts
        decision = await self.permits.take_scheduled(
            run.tenant_id, start.scheduled_by, run.workflow_id, per_minute=per_minute
        )
        if decision.allowed:
            return RunStartAdmission()
        activity.logger.warning(
            "scheduled run %s refused: tenant %r over rate_limit_run_starts",
            run.workflow_id,
            run.tenant_id,
        )
        return RunStartAdmission(
            admitted=False,
            error=(
                f"schedule '{start.scheduled_by}' started this run while tenant "
                f"{run.tenant_id!r} was over its limit of {per_minute} run starts per "
                "minute (rate_limit_run_starts): none of its nodes ran; the schedule "
                "goes on"
            ),
        )
