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


_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


def _every_seconds(text: str) -> float:
    """The interval of ``@every <duration>[/<offset>]`` (a Go duration such as ``1h30m``)."""
    duration = text.removeprefix("@every ").strip().split("/", 1)[0]
    parts = _GO_DURATION.findall(duration)
    if not duration or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"'@every' needs a duration such as 5m or 1h30m, got {duration!r}")
    return sum(float(number) * _GO_UNIT_SECONDS[unit] for number, unit in parts)


def check_cron(value: str) -> str:
    """``value`` if it has the shape of a cron expression, else ValueError naming why.

    Like ``interval_seconds``, a cron may not start runs more often than once a
    minute: ``@every`` below 60 s and a seconds field (7 fields) other than one
    number are refused.
    """
    text = value.strip()
    if text.startswith("@"):
        if text in _CRON_NAMES:
            return text
        if text.startswith("@every "):
            if _every_seconds(text) < MIN_INTERVAL_SECONDS:
                raise ValueError(
                    f"'@every' must be at least {MIN_INTERVAL_SECONDS} seconds (a schedule "
                    "starts at most one run a minute)"
                )
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
    if len(fields) == 7 and not (fields[0].isdigit() and int(fields[0]) < 60):
        raise ValueError(
            f"the seconds field must be one second (0-59), got {fields[0]!r} (a schedule "
            "starts at most one run a minute)"
        )
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
    user_id: str | None = Field(
        None,
        description=(
            "the schedule's owner: who created it. Its runs run as this user; only the owner "
            "or a schedule admin (schedule_admin_roles) may change it"
        ),
    )
    created_at: datetime | None = None
    updated_at: datetime | None = None
    next_runs: list[datetime] = Field(
        default_factory=list,
        description="next start times; empty while the schedule is paused",
    )
    recent_runs: list[ScheduledRun] = Field(default_factory=list)
    runs_started: int = 0


class ScheduleList(BaseModel):
    schedules: list[ScheduleDetail]


class ScheduleAccepted(BaseModel):
    """A schedule operation Temporal accepted (it starts runs asynchronously)."""

    status: str = "accepted"
    schedule_id: str
    message: str
