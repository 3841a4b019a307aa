"""The typed bodies in and out of the ``/schedules`` routes."""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

SCHEDULE_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
# Temporal's cron dialect: five fields (six or seven with seconds and years), or a
# predefined "@daily"-style name. A structurally wrong string is refused here with
# the field named; Temporal validates the values when the schedule is written.
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*?/,#LW-]+$")
_CRON_NAMES = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
# A cron's granularity is a minute; an interval no finer keeps one schedule from
# starting runs faster than a tenant could through the gateway's run-start limit.
MIN_INTERVAL_SECONDS = 60
MAX_INTERVAL_SECONDS = 366 * 24 * 3600


class OverlapPolicy(StrEnum):
    """What happens when a run is due while the schedule's previous run is still open."""

    SKIP = "skip"
    BUFFER_ONE = "buffer_one"
    BUFFER_ALL = "buffer_all"
    CANCEL_OTHER = "cancel_other"
    TERMINATE_OTHER = "terminate_other"
    ALLOW_ALL = "allow_all"


def check_cron(value: str) -> str:
    """``value`` if it has the shape of a cron expression, else ValueError naming why."""
    text = value.strip()
    if text.startswith("@"):
        if text in _CRON_NAMES or text.startswith("@every "):
            return text
        raise ValueError(f"unknown cron name {text!r}; one of {', '.join(sorted(_CRON_NAMES))}")
    fields = text.split()
    if len(fields) not in (5, 6, 7):
        raise ValueError(
            f"a cron expression has 5 fields (minute hour day month weekday), got {len(fields)}"
        )
    for part in fields:
        if not _CRON_FIELD.match(part):
            raise ValueError(f"cron field {part!r} has characters cron does not use")
    return text


class ScheduleBody(BaseModel):
    """What a schedule runs and when: a registered graph and its input, on a cron or interval."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "graph": "pipeline",
                    "input": {"text": "nightly digest"},
                    "cron": "0 2 * * *",
                    "time_zone": "Europe/Paris",
                    "overlap": "skip",
                    "note": "nightly digest",
                }
            ]
        },
    )

    graph: str = Field(
        min_length=1, max_length=128, description="name of a registered graph (GET /graphs)"
    )
    input: Any = Field(None, description="run input, checked against the graph's input_schema")
    context: dict[str, Any] = Field(default_factory=dict, description="shared run context")
    meta: dict[str, Any] = Field(
        default_factory=dict, description="metadata propagated from node to node"
    )
    cron: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="cron expression (minute hour day month weekday) or @daily-style name",
    )
    interval_seconds: int | None = Field(
        None,
        ge=MIN_INTERVAL_SECONDS,
        le=MAX_INTERVAL_SECONDS,
        description="run every this many seconds (instead of cron)",
    )
    interval_offset_seconds: int = Field(
        0, ge=0, le=MAX_INTERVAL_SECONDS, description="shift of the interval's start times"
    )
    time_zone: str = Field(
        "UTC", min_length=1, max_length=64, description="IANA time zone the cron is read in"
    )
    overlap: OverlapPolicy = Field(
        OverlapPolicy.SKIP, description="what to do when a run is due while the last is open"
    )
    note: str | None = Field(None, max_length=500, description="free text, e.g. why it is paused")

    @field_validator("cron")
    @classmethod
    def _cron_shape(cls, value: str | None) -> str | None:
        return None if value is None else check_cron(value)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name)") from None
        return value

    @model_validator(mode="after")
    def _one_timing(self) -> ScheduleBody:
        if (self.cron is None) == (self.interval_seconds is None):
            raise ValueError("give exactly one of 'cron' or 'interval_seconds'")
        if self.interval_seconds is not None and self.interval_offset_seconds >= (
            self.interval_seconds
        ):
            raise ValueError("'interval_offset_seconds' must be less than 'interval_seconds'")
        return self


class CreateScheduleRequest(ScheduleBody):
    """A new schedule; ``id`` is yours to choose (unique within your tenant)."""

    id: str | None = Field(
        None,
        pattern=SCHEDULE_ID_PATTERN,
        description="schedule id; generated when not given",
    )
    paused: bool = Field(False, description="create the schedule paused")


class PauseRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(None, max_length=500, description="why; shown on the schedule")


class TriggerRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlap: OverlapPolicy | None = Field(
        None, description="overlap policy of this one start; default: the schedule's"
    )


class BackfillRequest(BaseModel):
    """Start the runs the schedule would have started between ``start`` and ``end``."""

    model_config = ConfigDict(extra="forbid")

    start: AwareDatetime = Field(description="first instant (ISO 8601 with offset)")
    end: AwareDatetime = Field(description="last instant (ISO 8601 with offset)")
    overlap: OverlapPolicy = Field(
        OverlapPolicy.ALLOW_ALL,
        description="overlap policy among the backfilled runs (allow_all: run them all)",
    )

    @field_validator("end")
    @classmethod
    def _after_start(cls, value: datetime, info: ValidationInfo) -> datetime:
        start = info.data.get("start")
        if start is not None and value <= start:
            raise ValueError("'end' must be after 'start'")
        return value


class ScheduledRun(BaseModel):
    """One run a schedule started."""

    workflow_id: str
    run_id: str
    scheduled_at: datetime
    started_at: datetime


class ScheduleDetail(BaseModel):
    """A schedule as stored in Temporal: what it runs, when, and what it started."""

    id: str
    graph: str
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    cron: str | None = None
    interval_seconds: int | None = None
    interval_offset_seconds: int = 0
    time_zone: str
    overlap: OverlapPolicy
    paused: bool
    note: str | None = None
    user_id: str | None = Field(None, description="who created or last updated it")
    created_at: datetime | None = None
    updated_at: datetime | None = None
    next_runs: list[datetime] = Field(default_factory=list, description="next start times")
    recent_runs: list[ScheduledRun] = Field(default_factory=list)
    runs_started: int = 0


class ScheduleList(BaseModel):
    schedules: list[ScheduleDetail]


class ScheduleAccepted(BaseModel):
    """A schedule operation Temporal accepted (it starts runs asynchronously)."""

    status: str = "accepted"
    schedule_id: str
    message: str
