"""The gateway reports a live workstream's elapsed time from its own clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spindle.gateway.services.run_records import with_wall_clock_elapsed
from spindle.shared.contracts.workstreams import (
    WorkstreamInfo,
    WorkstreamList,
    WorkstreamPhase,
    WorkstreamState,
)

pytestmark = pytest.mark.unit

STARTED = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def info(state: WorkstreamState, elapsed: float) -> WorkstreamInfo:
    return WorkstreamInfo(
        launch_id="ws-1",
        workstream_id="ws-1",
        child_workflow_id="run-1.ws-1",
        task="t",
        interactive=False,
        state=state,
        phase=WorkstreamPhase.EXECUTING_TOOL,
        started_at=STARTED.isoformat(),
        deadline_seconds=300,
        elapsed_seconds=elapsed,
        deadline_used_pct=round(100 * elapsed / 300, 1),
    )


def test_a_quiet_running_workstream_still_ages() -> None:
    listed = WorkstreamList(workstreams=[info(WorkstreamState.RUNNING, 10.0)])
    now = STARTED + timedelta(seconds=150)
    [live] = with_wall_clock_elapsed(listed, now).workstreams
    assert live.elapsed_seconds == 150.0
    assert live.deadline_used_pct == 50.0


def test_a_finished_workstream_keeps_its_recorded_time() -> None:
    listed = WorkstreamList(workstreams=[info(WorkstreamState.COMPLETED, 42.0)])
    [done] = with_wall_clock_elapsed(listed, STARTED + timedelta(hours=1)).workstreams
    assert done.elapsed_seconds == 42.0
