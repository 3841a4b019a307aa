"""Schedules as Temporal Schedules, scoped to a tenant.

A schedule's action starts ``GraphRun`` with the ``GraphRunInput`` that
``POST /runs`` would build (``build_run_input``): the graph is resolved and the
input validated when the schedule is created or updated, and that snapshot is
what every scheduled run gets. ``scheduled_by`` makes the run write its own run
document and stream metadata (worker/activities/run_start.py), since a start
Temporal makes runs no gateway code. The run carries the same search attributes
and memo as a gateway start, so every per-run route finds its tenant.

Temporal schedule ids are ``sch-<tenant digest>-<id>``: a tenant only ever
addresses its own, so another tenant's schedule is exactly an unknown one.

A schedule's owner is the user who created it (kept in the schedule's memo,
which a replace does not change); its runs always run as the owner. Only the
owner or a user with a role in ``schedule_admin_roles`` may replace, pause,
unpause, delete, trigger or backfill it (``check_manage``). A trigger takes one
run-start permit; a backfill counts its runs first (Temporal's matching times in
the span), is refused past ``schedule_backfill_max_runs`` and takes one permit
per run, all before Temporal is asked, and leaves them prepaid for the runs, which
otherwise take their permit on the worker as timetable runs do (docs/schedules.md).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio.api.workflowservice.v1 import ListScheduleMatchingTimesRequest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError, RPCStatusCode

from spindle.gateway.http.temporal_errors import temporal_error
from spindle.gateway.models import StartRunRequest
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.runs.starter import build_run_input, run_memo, run_search_attributes
from spindle.gateway.runs.temporal import RPC_TIMEOUT, TENANT_KEY
from spindle.gateway.schedules.models import (
    BackfillRequest,
    CreateScheduleRequest,
    OverlapPolicy,
    ScheduleBody,
    ScheduleDetail,
    ScheduledRun,
)
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_starts import admit_scheduled_starts, admit_start
from spindle.shared.contracts.errors import (
    Conflict,
    Forbidden,
    NotFound,
    SpindleError,
    ValidationFailed,
)
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive

_OVERLAP = {
    OverlapPolicy.SKIP: ScheduleOverlapPolicy.SKIP,
    OverlapPolicy.BUFFER_ONE: ScheduleOverlapPolicy.BUFFER_ONE,
    OverlapPolicy.BUFFER_ALL: ScheduleOverlapPolicy.BUFFER_ALL,
    OverlapPolicy.CANCEL_OTHER: ScheduleOverlapPolicy.CANCEL_OTHER,
    OverlapPolicy.TERMINATE_OTHER: ScheduleOverlapPolicy.TERMINATE_OTHER,
    OverlapPolicy.ALLOW_ALL: ScheduleOverlapPolicy.ALLOW_ALL,
}
_CRON_MEMO = "schedule_cron"
_OVERLAP_NAME = {temporal: ours for ours, temporal in _OVERLAP.items()}


def _tenant_prefix(tenant_id: str) -> str:
    return f"sch-{hashlib.sha256(tenant_id.encode()).hexdigest()[:16]}-"


def temporal_schedule_id(tenant_id: str, schedule_id: str) -> str:
    """The Temporal schedule id of a tenant's schedule."""
    return _tenant_prefix(tenant_id) + schedule_id


def not_found(schedule_id: str) -> NotFound:
    """The one answer for an unknown schedule and for another tenant's."""
    return NotFound(f"schedule '{schedule_id}' not found")


class ScheduleService:
    """The tenant-scoped schedule operations the routes call."""

    def __init__(self, caller: Caller) -> None:
        self.caller = caller
        self.temporal: Client = caller.state.temporal
        self.tenant_id = caller.tenant_id
        self.archive: RunArchive = caller.state.archive
        self.catalog: CatalogCache = caller.state.catalog
        self.settings: Settings = caller.state.settings

    def _handle(self, schedule_id: str) -> ScheduleHandle:
        return self.temporal.get_schedule_handle(temporal_schedule_id(self.tenant_id, schedule_id))

    async def _schedule(
        self, body: ScheduleBody, schedule_id: str, user_id: str | None, state: ScheduleState
    ) -> Schedule:
        request = StartRunRequest(
            graph=body.graph, input=body.input, context=body.context, meta=body.meta
        )
        run_input = await build_run_input(
            request,
            tenant_id=self.tenant_id,
            user_id=user_id,
            archive=self.archive,
            catalog=self.catalog,
            settings=self.settings,
        )
        run_input.scheduled_by = schedule_id
        spec = ScheduleSpec(time_zone_name=body.time_zone)
        if body.cron is not None:
            spec.cron_expressions = [body.cron]
        else:
            assert body.interval_seconds is not None
            spec.intervals = [
                ScheduleIntervalSpec(
                    every=timedelta(seconds=body.interval_seconds),
                    offset=timedelta(seconds=body.interval_offset_seconds),
                )
            ]
        action = ScheduleActionStartWorkflow(
            GRAPH_RUN_WORKFLOW,
            run_input,
            # Temporal appends the scheduled time: each run has an id of its own.
            id=f"run-{temporal_schedule_id(self.tenant_id, schedule_id)}",
            task_queue=self.settings.task_queue,
            # Temporal describes a cron as calendar specs: its text is kept here.
            memo=run_memo(run_input) | ({_CRON_MEMO: body.cron} if body.cron else {}),
            typed_search_attributes=run_search_attributes(run_input),
            static_summary=f"graph {run_input.graph.name} (schedule {schedule_id})",
        )
        return Schedule(
            action=action,
            spec=spec,
            policy=SchedulePolicy(overlap=_OVERLAP[body.overlap]),
            state=state,
        )

    async def create(self, body: CreateScheduleRequest, user_id: str | None) -> ScheduleDetail:
        """Validate and create a schedule.

        Raises:
            NotFound: the graph is not registered.
            GraphInvalid, ExecutorNotFound, InputInvalid: the graph or input is bad.
            Conflict: the tenant has a schedule of that id.
        """
        schedule_id = body.id or uuid.uuid4().hex[:16]
        schedule = await self._schedule(
            body, schedule_id, user_id, ScheduleState(note=body.note, paused=body.paused)
        )
        try:
            await self.temporal.create_schedule(
                temporal_schedule_id(self.tenant_id, schedule_id),
                schedule,
                memo={"tenant": self.tenant_id, "user": user_id, "id": schedule_id},
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(TENANT_KEY, self.tenant_id)]
                ),
                rpc_timeout=RPC_TIMEOUT,
            )
        except ScheduleAlreadyRunningError:
            raise Conflict(
                f"schedule '{schedule_id}' already exists",
                errors=[{"in": "body", "field": "id", "rule": "unique"}],
            ) from None
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id, body) from exc
        return await self.get(schedule_id)

    async def get(self, schedule_id: str) -> ScheduleDetail:
        """The schedule, or ``NotFound``."""
        description = await self._describe(schedule_id)
        return await self._detail(schedule_id, description)

    async def list(self) -> list[ScheduleDetail]:
        """The tenant's schedules (Temporal's list is eventually consistent)."""
        prefix = _tenant_prefix(self.tenant_id)
        ids: list[str] = []
        try:
            listing = await self.temporal.list_schedules(rpc_timeout=RPC_TIMEOUT)
            async for entry in listing:
                if entry.id.startswith(prefix):
                    ids.append(entry.id.removeprefix(prefix))
        except RPCError as exc:
            raise temporal_error(exc) from exc
        found = []
        for schedule_id in sorted(ids):
            try:
                found.append(await self.get(schedule_id))
            except NotFound:
                continue  # deleted since the (eventually consistent) listing
        return found

    def check_manage(self, detail: ScheduleDetail) -> None:
        """Refuse a caller who is neither the schedule's owner nor a schedule admin.

        Raises:
            Forbidden: 403 naming the roles that may (``schedule_admin_roles``).
        """
        identity = self.caller.identity
        if identity.method == "disabled" or detail.user_id in (None, identity.user_id):
            return
        roles = self.settings.schedule_admin_roles
        if identity.has_any_role(roles):
            return
        raise Forbidden(
            f"only the schedule's owner or a user with role "
            f"{' or '.join(roles) or '(none configured)'} may change schedule "
            f"'{detail.id}' (schedule_admin_roles)"
        )

    async def update(self, schedule_id: str, body: ScheduleBody, user_id: str | None) -> None:
        """Replace what and when the schedule runs; its paused state is kept.

        Args:
            user_id: who the runs run as: the schedule's owner, whoever replaces it.
        """
        await self._describe(schedule_id)  # 404 before validating against the graph

        async def updater(current: ScheduleUpdateInput) -> ScheduleUpdate:
            state = current.description.schedule.state
            if body.note is not None:
                state.note = body.note
            return ScheduleUpdate(await self._schedule(body, schedule_id, user_id, state))

        try:
            await self._handle(schedule_id).update(updater, rpc_timeout=RPC_TIMEOUT)
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id, body) from exc

    async def pause(self, schedule_id: str, note: str | None, *, paused: bool) -> None:
        """Pause or unpause the schedule (``note`` says why)."""
        handle = self._handle(schedule_id)
        try:
            if paused:
                await handle.pause(note=note or "paused", rpc_timeout=RPC_TIMEOUT)
            else:
                await handle.unpause(note=note or "unpaused", rpc_timeout=RPC_TIMEOUT)
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id) from exc

    async def trigger(self, schedule_id: str, overlap: OverlapPolicy | None) -> None:
        """Start one run now (even when the schedule is paused).

        Raises:
            RateLimited: over the tenant's run-start limit, like ``POST /runs``
                (docs/schedules.md).
        """
        await admit_start(self.caller)
        # The run takes no second permit on the worker (shared/platform/run_start_permits.py).
        await self.caller.limits.prepay_scheduled(self.tenant_id, schedule_id, 1)
        handle = self._handle(schedule_id)
        try:
            await handle.trigger(
                overlap=_OVERLAP[overlap] if overlap else None, rpc_timeout=RPC_TIMEOUT
            )
        except RPCError as exc:
            await self.caller.limits.withdraw_scheduled(self.tenant_id, schedule_id, 1)
            await self.caller.limits.refund_run_start(self.tenant_id)
            raise _schedule_error(exc, schedule_id) from exc

    async def backfill(self, schedule_id: str, body: BackfillRequest) -> int:
        """Start the runs the schedule would have started between ``start`` and ``end``.

        Returns:
            How many runs the backfill starts (each took a run-start permit).

        Raises:
            ValidationFailed: the span is longer than ``schedule_backfill_max_days``,
                or holds more runs than ``schedule_backfill_max_runs`` (or than
                ``rate_limit_run_starts``, which could never admit them).
            RateLimited: the tenant's run-start permits left cannot cover every run.
        """
        limit = timedelta(days=self.settings.schedule_backfill_max_days)
        if body.end - body.start > limit:
            raise ValidationFailed(
                f"a backfill spans at most {limit.days} days",
                errors=[
                    {
                        "in": "body",
                        "field": "end",
                        "rule": "max_span",
                        "message": f"end: at most {limit.days} days after start",
                    }
                ],
            )
        runs = await self._matching_times(schedule_id, body)
        cap, setting = self._backfill_cap()
        if runs > cap:
            raise ValidationFailed(
                f"a backfill starts at most {cap} runs ({setting}); this span holds {runs}",
                errors=[
                    {
                        "in": "body",
                        "field": "end",
                        "rule": "max_runs",
                        "message": f"the span holds {runs} start times; at most {cap} ({setting})",
                    }
                ],
            )
        if runs == 0:
            return 0
        await admit_scheduled_starts(self.caller, runs)
        await self.caller.limits.prepay_scheduled(self.tenant_id, schedule_id, runs)
        handle = self._handle(schedule_id)
        try:
            await handle.backfill(
                ScheduleBackfill(
                    start_at=body.start, end_at=body.end, overlap=_OVERLAP[body.overlap]
                ),
                rpc_timeout=RPC_TIMEOUT,
            )
        except RPCError as exc:
            await self.caller.limits.withdraw_scheduled(self.tenant_id, schedule_id, runs)
            await self.caller.limits.refund_run_start(self.tenant_id, runs)
            raise _schedule_error(exc, schedule_id) from exc
        return runs

    def _backfill_cap(self) -> tuple[int, str]:
        """The most runs one backfill may start, and the setting that says so."""
        settings = self.settings
        if settings.rate_limit_run_starts < settings.schedule_backfill_max_runs:
            return settings.rate_limit_run_starts, "rate_limit_run_starts"
        return settings.schedule_backfill_max_runs, "schedule_backfill_max_runs"

    async def _matching_times(self, schedule_id: str, body: BackfillRequest) -> int:
        """How many runs the schedule's spec starts in the span (Temporal's own count)."""
        request = ListScheduleMatchingTimesRequest(
            namespace=self.temporal.namespace,
            schedule_id=temporal_schedule_id(self.tenant_id, schedule_id),
        )
        request.start_time.FromDatetime(body.start)
        request.end_time.FromDatetime(body.end)
        try:
            reply = await self.temporal.workflow_service.list_schedule_matching_times(
                request, timeout=RPC_TIMEOUT
            )
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id) from exc
        return len(reply.start_time)

    async def delete(self, schedule_id: str) -> None:
        """Delete the schedule; runs it started keep running."""
        try:
            await self._handle(schedule_id).delete(rpc_timeout=RPC_TIMEOUT)
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id) from exc

    async def _describe(self, schedule_id: str) -> ScheduleDescription:
        try:
            return await self._handle(schedule_id).describe(rpc_timeout=RPC_TIMEOUT)
        except RPCError as exc:
            raise _schedule_error(exc, schedule_id) from exc

    async def _detail(self, schedule_id: str, description: ScheduleDescription) -> ScheduleDetail:
        schedule = description.schedule
        action = schedule.action
        run_input: GraphRunInput | None = None
        if isinstance(action, ScheduleActionStartWorkflow) and action.args:
            # Described actions hold raw payloads: decode with the client's converter.
            decoded = await self.temporal.data_converter.decode(list(action.args), [GraphRunInput])
            run_input = decoded[0]
        memo = await description.memo()
        cron: str | None = None
        if isinstance(action, ScheduleActionStartWorkflow) and action.memo:
            raw = action.memo.get(_CRON_MEMO)
            if raw is not None:
                [cron] = await self.temporal.data_converter.decode([raw], [str])
        info = description.info
        recent = [
            ScheduledRun(
                workflow_id=result.action.workflow_id,
                run_id=result.action.first_execution_run_id,
                scheduled_at=result.scheduled_at,
                started_at=result.started_at,
            )
            for result in info.recent_actions
            if isinstance(result.action, ScheduleActionExecutionStartWorkflow)
        ]
        timing = _timing(schedule.spec)
        return ScheduleDetail(
            id=schedule_id,
            graph=run_input.graph.name if run_input else "",
            input=run_input.input if run_input else None,
            context=run_input.context if run_input else {},
            meta=run_input.meta if run_input else {},
            cron=cron or timing.get("cron"),
            interval_seconds=timing.get("interval_seconds"),
            interval_offset_seconds=timing.get("interval_offset_seconds", 0),
            time_zone=schedule.spec.time_zone_name or "UTC",
            overlap=_OVERLAP_NAME.get(schedule.policy.overlap, OverlapPolicy.SKIP),
            paused=schedule.state.paused,
            note=schedule.state.note or None,
            user_id=_owner(memo, run_input),
            created_at=info.created_at,
            updated_at=info.last_updated_at,
            # Temporal keeps computing the times of a paused schedule; none of them
            # will start a run, so a paused schedule lists none (docs/schedules.md).
            next_runs=[] if schedule.state.paused else list(info.next_action_times),
            recent_runs=recent,
            runs_started=info.num_actions,
        )


def _owner(memo: Mapping[str, Any], run_input: GraphRunInput | None) -> str | None:
    """Who created the schedule (the memo a replace keeps), else who its runs run as."""
    user = memo.get("user")
    if isinstance(user, str) and user:
        return user
    return run_input.user_id if run_input else None


def _timing(spec: ScheduleSpec | None) -> dict[str, Any]:
    if spec is None:
        return {}
    if spec.cron_expressions:
        return {"cron": spec.cron_expressions[0]}
    if spec.intervals:
        interval = spec.intervals[0]
        return {
            "interval_seconds": int(interval.every.total_seconds()),
            "interval_offset_seconds": int(interval.offset.total_seconds())
            if interval.offset
            else 0,
        }
    # Temporal stores a cron as calendars when listing: the summary leaves it out.
    return {}


def _schedule_error(
    exc: RPCError, schedule_id: str, body: ScheduleBody | None = None
) -> SpindleError:
    if exc.status == RPCStatusCode.NOT_FOUND:
        return not_found(schedule_id)
    if exc.status == RPCStatusCode.INVALID_ARGUMENT and body is not None:
        # Values the shape checks let through (e.g. "61 * * * *"): Temporal's own word.
        field = "cron" if body.cron is not None else "interval_seconds"
        return ValidationFailed(
            f"{field}: Temporal refused the schedule: {exc.message}",
            errors=[{"in": "body", "field": field, "rule": "temporal", "message": exc.message}],
        )
    return temporal_error(exc, what="Temporal")
