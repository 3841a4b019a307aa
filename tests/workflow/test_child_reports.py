"""``ChildReports``: what a launching agent hears of its children, checked as data.

The same records run supervised on the time-skipping server in
``test_parent_hears_children.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from spindle.shared.contracts.workstreams import (
    WORKSTREAM_REPORT_PREFIX,
    LaunchRequest,
    WorkstreamOutcome,
    WorkstreamState,
)
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import LlmRequest
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.workflows.workstreams.parent_child_record import ChildRecord
from spindle.worker.workflows.workstreams.parent_reports import (
    ERROR_CHARS,
    REPORT_ARTIFACTS,
    ChildReports,
    report_text,
)
from tests.workflow.run_parts import RUN

pytestmark = pytest.mark.unit

LAUNCHED = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def _child(
    n: int, *, by: str | None = "lead", label: str | None = None, **fields: Any
) -> ChildRecord:
    return ChildRecord(
        launch_id=f"ws-{n}",
        request=LaunchRequest(task=f"task {n}", label=label, **fields.pop("launch", {})),
        child_id=f"wf-1.ws-{n}",
        started_at=LAUNCHED,
        parent=RUN,
        user_id="ann",
        next_steer_id=lambda: "s-1",
        launched_by=by,
        **fields,
    )


def _end(reports: ChildReports, child: ChildRecord, state: WorkstreamState, **outcome: Any) -> None:
    child.outcome = WorkstreamOutcome(launch_id=child.launch_id, state=state, **outcome)
    child.state = state
    child.settled = True
    reports.settled(child)


def test_each_report_is_heard_once_in_end_order_by_its_launcher_only() -> None:
    children = {c.launch_id: c for c in (_child(1), _child(2), _child(3, by="other"), _child(4))}
    reports = ChildReports(children)
    assert not reports.has("lead")
    assert reports.awaited("lead") == ["ws-1", "ws-2", "ws-4"]

    _end(reports, children["ws-2"], WorkstreamState.FAILED, error="boom")
    _end(reports, children["ws-3"], WorkstreamState.COMPLETED, summary="not yours")
    _end(reports, children["ws-1"], WorkstreamState.COMPLETED, summary="the answer is 42")
    assert reports.has("lead") and reports.awaited("lead") == ["ws-4"]
    heard = reports.take("lead")
    assert [m.role for m in heard] == ["system", "system"]
    assert "ws-2 failed" in (heard[0].content or "") and "Error: boom" in (heard[0].content or "")
    assert "ws-1 completed" in (heard[1].content or "")
    assert "Result: the answer is 42" in (heard[1].content or "")
    assert reports.take("lead") == [] and not reports.has("lead")
    assert [m.content for m in reports.take("other")] == [
        f"{WORKSTREAM_REPORT_PREFIX} Workstream ws-3 completed (state: completed).\n"
        "Result: not yours"
    ]


def test_a_child_launched_with_wait_false_is_not_awaited_but_still_heard() -> None:
    children = {"ws-1": _child(1, label="side quest", wait=False)}
    reports = ChildReports(children)
    assert reports.awaited("lead") == []
    _end(reports, children["ws-1"], WorkstreamState.TIMEOUT, summary="half of it")
    (message,) = reports.take("lead")
    assert 'Workstream "side quest" (ws-1) timed out (state: timeout)' in (message.content or "")


def test_a_report_is_bounded() -> None:
    child = _child(1, merged=[f"files/ws-1/part{n}.md" for n in range(50)])
    child.outcome = WorkstreamOutcome(
        launch_id="ws-1", state=WorkstreamState.FAILED, error="x" * 10_000
    )
    text = report_text(child)
    assert f"part{REPORT_ARTIFACTS - 1}.md" in text and f"part{REPORT_ARTIFACTS}.md" not in text
    assert f"and {50 - REPORT_ARTIFACTS} more" in text
    assert len(text) < ERROR_CHARS + REPORT_ARTIFACTS * 25 + 200


def test_what_was_heard_and_the_end_order_cross_continue_as_new() -> None:
    children = {c.launch_id: c for c in (_child(1), _child(2), _child(3))}
    reports = ChildReports(children)
    _end(reports, children["ws-2"], WorkstreamState.COMPLETED, summary="two")
    reports.take("lead")
    _end(reports, children["ws-1"], WorkstreamState.COMPLETED, summary="one")
    adopted = {
        k: ChildRecord.adopt(c.carried(), parent=RUN, user_id="ann", next_steer_id=lambda: "s")
        for k, c in children.items()
    }
    next_generation = ChildReports(adopted)
    next_generation.restored()
    _end(next_generation, adopted["ws-3"], WorkstreamState.CANCELED)
    heard = [m.content or "" for m in next_generation.take("lead")]
    assert ["ws-1" in heard[0], "ws-3" in heard[1], len(heard)] == [True, True, 2]
    assert adopted["ws-3"].end_seq == 3


def test_the_offline_model_answers_from_the_reports_it_was_given() -> None:
    launch = ToolCall(id="call_1", name="launch_workstream", arguments={"task": "t"})
    messages = [
        ChatMessage(role="system", content="You lead."),
        ChatMessage(role="user", content="Research otters"),
        ChatMessage(role="assistant", content="", tool_calls=[launch]),
        ChatMessage(role="tool", content='{"launch_id": "ws-1"}', tool_call_id="call_1"),
        ChatMessage(role="assistant", content="Launched."),
        ChatMessage(
            role="system",
            content=f"{WORKSTREAM_REPORT_PREFIX} Workstream ws-1 completed.\nResult: otters float",
        ),
    ]
    reply = OfflineProvider().respond(LlmRequest(model="offline", messages=messages))
    assert "From the workstreams:" in (reply.message.content or "")
    assert "otters float" in (reply.message.content or "")
    assert not reply.message.tool_calls
