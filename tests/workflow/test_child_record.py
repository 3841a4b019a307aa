"""``ChildRecord``: what a parent knows of a launched workstream, and what it carries.

The supervision (``SupervisedChild``) runs on the time-skipping server in
``test_workstream_parent.py`` and ``test_continue_as_new.py``; the record is data,
checked here without a workflow.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from spindle.shared.contracts.budgets import BudgetUsage
from spindle.shared.contracts.workstreams import (
    LaunchRequest,
    Progress,
    WorkstreamOutcome,
    WorkstreamPhase,
    WorkstreamState,
)
from spindle.worker.workflows.workstreams.parent_child_record import (
    SUMMARY_CHARS,
    ChildRecord,
    trimmed,
)
from tests.workflow.run_parts import RUN

pytestmark = pytest.mark.unit

LAUNCHED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def _record(**fields: Any) -> ChildRecord:
    return ChildRecord(
        launch_id="ws-1",
        request=LaunchRequest(task="summarise the report", deadline_seconds=120),
        child_id="wf-1.ws-1",
        started_at=LAUNCHED,
        parent=RUN,
        user_id="ann",
        next_steer_id=lambda: "s-1",
        **fields,
    )


def test_a_child_without_a_deadline_of_its_own_takes_the_requests() -> None:
    assert _record().deadline_seconds == 120
    assert _record(deadline_seconds=30).deadline_seconds == 30


def test_the_next_generation_adopts_a_running_child_as_it_was() -> None:
    record = _record(adopted=True, steps_done=2, iteration=4, latest_message="half way")
    record.extend(60)
    adopted = ChildRecord.adopt(
        record.carried(), parent=RUN, user_id="ann", next_steer_id=lambda: "s-9"
    )
    assert adopted.adopted and adopted.started
    assert adopted.carried() == record.carried()
    assert adopted.deadline_seconds == 180
    assert adopted.steps_done == 2
    assert adopted.started_at == LAUNCHED


def test_only_a_settled_or_untouched_running_child_is_handed_over() -> None:
    assert _record(settled=True).portable
    assert _record(adopted=True).portable
    assert not _record().portable  # not started yet
    assert not _record(adopted=True, busy=True).portable  # a deadline step under way
    assert not _record(adopted=True, stop_reason="terminate").portable


def test_progress_updates_the_record_until_the_child_has_ended() -> None:
    record = _record()
    usage = BudgetUsage(llm_tokens=10)
    long = "x" * (SUMMARY_CHARS + 10)
    record.progress(
        Progress(
            launch_id="ws-1",
            phase=WorkstreamPhase.EXECUTING_TOOL,
            tool="search",
            iteration=3,
            message=long,
            usage=usage,
        )
    )
    assert (record.phase, record.tool, record.iteration) == (
        WorkstreamPhase.EXECUTING_TOOL,
        "search",
        3,
    )
    assert record.latest_message == trimmed(long)
    assert record.latest_message is not None and len(record.latest_message) == SUMMARY_CHARS
    record.ended_at = LAUNCHED + timedelta(seconds=30)
    record.progress(Progress(launch_id="ws-1", phase=WorkstreamPhase.PLANNING, iteration=9))
    assert record.iteration == 3


def test_its_line_in_the_workstreams_query() -> None:
    outcome = WorkstreamOutcome(
        launch_id="ws-1", state=WorkstreamState.COMPLETED, summary="done", iterations=5
    )
    record = _record(merged=["files/wf-1.ws-1/out.md"])
    running = record.info(LAUNCHED + timedelta(seconds=30))
    assert running.elapsed_seconds == 30.0
    assert running.deadline_used_pct == 25.0
    record.ended_at, record.outcome = LAUNCHED + timedelta(seconds=60), outcome
    record.state = WorkstreamState.COMPLETED
    ended = record.info(LAUNCHED + timedelta(seconds=90))
    assert ended.elapsed_seconds == 60.0
    assert (ended.summary, ended.iteration, ended.artifacts) == (
        "done",
        5,
        ["files/wf-1.ws-1/out.md"],
    )
