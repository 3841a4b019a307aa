"""What a run's Temporal history says it executed: activities on a task queue, and
local activities (a marker each, whose details name the activity)."""

from __future__ import annotations

from typing import NamedTuple

import orjson
from temporalio.client import WorkflowHistory

LOCAL_ACTIVITY_MARKER = "core_local_activity"


class Executed(NamedTuple):
    activity_id: str
    activity_type: str
    local: bool


def executed_activities(history: WorkflowHistory) -> list[Executed]:
    """Every activity the history scheduled or recorded as a local activity, in order."""
    executed: list[Executed] = []
    for event in history.events:
        if event.HasField("activity_task_scheduled_event_attributes"):
            attrs = event.activity_task_scheduled_event_attributes
            executed.append(Executed(attrs.activity_id, attrs.activity_type.name, local=False))
        elif event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER:
            # The core SDK's marker data: JSON with the activity's id and type.
            [payload] = event.marker_recorded_event_attributes.details["data"].payloads
            data = orjson.loads(payload.data)
            executed.append(Executed(data["activity_id"], data["activity_type"], local=True))
    return executed
