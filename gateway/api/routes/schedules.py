"""Schedules: graph runs Temporal starts on a cron or an interval (docs/schedules.md).

Any user of the tenant may read a schedule; only its owner (who created it) or a
user with a role in ``schedule_admin_roles`` may replace, pause, unpause,
delete, trigger or backfill it (``ManagedScheduleDep``: 404 for another tenant's
first, then 403).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Response, status

from spindle.gateway.api.deps import CallerDep
from spindle.gateway.schedules.models import (
    SCHEDULE_ID_PATTERN,
    BackfillRequest,
    CreateScheduleRequest,
    PauseRequest,
    ScheduleAccepted,
    ScheduleBody,
    ScheduleDetail,
    ScheduleList,
    TriggerRequest,
)
from spindle.gateway.schedules.service import ScheduleService, not_found

router = APIRouter(tags=["schedules"])

PROBLEMS: dict[int | str, dict[str, Any]] = {
    401: {"description": "missing or invalid credentials (problem+json)"},
    403: {
        "description": "changes need the schedule's owner or a role in schedule_admin_roles "
        "(problem+json)"
    },
    404: {"description": "unknown schedule (or another tenant's) or graph (problem+json)"},
    409: {"description": "a schedule of that id exists (problem+json)"},
    429: {
        "description": "trigger/backfill over the tenant's run-start limit, one permit per "
        "run (problem+json)"
    },
    422: {
        "description": "invalid field, graph or input, naming the field; a backfill past "
        "schedule_backfill_max_runs (problem+json)"
    },
    503: {"description": "Temporal unavailable; retry (problem+json)"},
}

ScheduleId = Annotated[str, Path(max_length=100, description="the schedule's id")]


def _known_shape(schedule_id: str) -> str:
    # An id no schedule can have is unknown, not malformed: the same 404 as any.
    if not re.match(SCHEDULE_ID_PATTERN, schedule_id):
        raise not_found(schedule_id)
    return schedule_id


@dataclass(frozen=True)
class OwnedSchedule:
    """A schedule of the caller's tenant, found before any body is looked at."""

    id: str
    detail: ScheduleDetail
    service: ScheduleService


async def owned_schedule(
    schedule_id: ScheduleId,
    *,
    caller: CallerDep,
) -> OwnedSchedule:
    """The schedule in the path if the caller's tenant has it; else 404.

    A dependency, so another tenant's schedule is a 404 even when the body is
    also wrong, exactly as an unknown schedule is.
    """
    service = ScheduleService(caller)
    detail = await service.get(_known_shape(schedule_id))
    return OwnedSchedule(schedule_id, detail, service)


OwnedScheduleDep = Annotated[OwnedSchedule, Depends(owned_schedule)]


async def managed_schedule(schedule: OwnedScheduleDep) -> OwnedSchedule:
    """The schedule in the path if the caller may change it: 404 as ``owned_schedule``,
    then 403 unless the caller owns it or holds a role in ``schedule_admin_roles``."""
    schedule.service.check_manage(schedule.detail)
    return schedule


ManagedScheduleDep = Annotated[OwnedSchedule, Depends(managed_schedule)]


@router.post(
    "/schedules",
    status_code=status.HTTP_201_CREATED,
    response_model=ScheduleDetail,
    summary="Create a schedule that starts a registered graph on a cron or interval",
    responses=PROBLEMS,
)
async def create_schedule(
    body: CreateScheduleRequest,
    *,
    response: Response,
    caller: CallerDep,
) -> ScheduleDetail:
    service = ScheduleService(caller)
    created = await service.create(body, caller.user_id)
    response.headers["Location"] = f"/schedules/{created.id}"
    return created


@router.get(
    "/schedules",
    response_model=ScheduleList,
    summary="List the caller's tenant's schedules",
    responses=PROBLEMS,
)
async def list_schedules(
    *,
    caller: CallerDep,
) -> ScheduleList:
    service = ScheduleService(caller)
    return ScheduleList(schedules=await service.list())


@router.get(
    "/schedules/{schedule_id}",
    response_model=ScheduleDetail,
    summary="Describe a schedule: what it runs, when, and its recent runs",
    responses=PROBLEMS,
)
async def get_schedule(schedule: OwnedScheduleDep) -> ScheduleDetail:
    return schedule.detail


@router.put(
    "/schedules/{schedule_id}",
    response_model=ScheduleDetail,
    summary="Replace what and when a schedule runs (its paused state is kept)",
    responses=PROBLEMS,
)
async def update_schedule(schedule: ManagedScheduleDep, body: ScheduleBody) -> ScheduleDetail:
    # The new graph runs as the schedule's owner, whoever (owner or admin) replaced it.
    await schedule.service.update(schedule.id, body, schedule.detail.user_id)
    return await schedule.service.get(schedule.id)


async def _set_paused(schedule: OwnedSchedule, note: str | None, paused: bool) -> ScheduleDetail:
    await schedule.service.pause(schedule.id, note, paused=paused)
    return await schedule.service.get(schedule.id)


@router.post(
    "/schedules/{schedule_id}/pause",
    response_model=ScheduleDetail,
    summary="Pause a schedule: it starts no runs until unpaused",
    responses=PROBLEMS,
)
async def pause_schedule(
    schedule: ManagedScheduleDep, body: Annotated[PauseRequest | None, Body()] = None
) -> ScheduleDetail:
    return await _set_paused(schedule, body.note if body else None, True)


@router.post(
    "/schedules/{schedule_id}/unpause",
    response_model=ScheduleDetail,
    summary="Unpause a schedule",
    responses=PROBLEMS,
)
async def unpause_schedule(
    schedule: ManagedScheduleDep, body: Annotated[PauseRequest | None, Body()] = None
) -> ScheduleDetail:
    return await _set_paused(schedule, body.note if body else None, False)


@router.post(
    "/schedules/{schedule_id}/trigger",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleAccepted,
    summary="Start one run of the schedule now (its run appears in recent_runs)",
    responses=PROBLEMS,
)
async def trigger_schedule(
    schedule: ManagedScheduleDep,
    body: Annotated[TriggerRequest | None, Body()] = None,
) -> ScheduleAccepted:
    # A start the caller asks for now: counted like POST /runs (docs/schedules.md).
    await schedule.service.trigger(schedule.id, body.overlap if body else None)
    return ScheduleAccepted(schedule_id=schedule.id, message="a run is being started")


@router.post(
    "/schedules/{schedule_id}/backfill",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=ScheduleAccepted,
    summary="Start the runs the schedule would have started between start and end",
    responses=PROBLEMS,
)
async def backfill_schedule(
    schedule: ManagedScheduleDep, body: BackfillRequest
) -> ScheduleAccepted:
    # One run-start permit per run, all taken before Temporal is asked (docs/schedules.md).
    runs = await schedule.service.backfill(schedule.id, body)
    return ScheduleAccepted(
        schedule_id=schedule.id, message=f"the backfill's {runs} runs are starting"
    )


@router.delete(
    "/schedules/{schedule_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete a schedule (runs it started keep running)",
    responses=PROBLEMS,
)
async def delete_schedule(schedule: ManagedScheduleDep) -> Response:
    await schedule.service.delete(schedule.id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
