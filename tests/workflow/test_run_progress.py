"""``RunProgress``: the state, the output and the bounded node reports of a run."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spindle.shared.contracts.runs import (
    NodeStatus,
)
from spindle.worker.contracts import policies
from spindle.worker.workflows.run_progress import RunProgress
from tests.workflow.run_parts import outcome, run_input, two_node_graph

pytestmark = pytest.mark.unit


def test_a_node_output_goes_into_the_state_and_becomes_the_run_output() -> None:
    spec = two_node_graph()
    record = RunProgress(run_input())
    record.succeeded(spec.node("fetch"), 1, outcome("fetch", {"n": 3}, {"tools_used_count": 1}))
    assert record.state["input"] == {"q": 1}
    assert record.state["fetch"] == {"n": 3}
    assert record.state["_previous"] == {"n": 3}
    assert record.state["meta"] == {"m": 0, "tools_used_count": 1}
    assert record.output == {"n": 3}
    assert [r.visit for r in record.reports] == [1]


def test_an_output_node_sets_the_run_output_for_good() -> None:
    spec = two_node_graph()
    record = RunProgress(run_input())
    record.succeeded(spec.node("done"), 1, outcome("done", "final"))
    record.succeeded(spec.node("fetch"), 2, outcome("fetch", "later"))
    assert record.output == "final"
    assert record.state["_previous"] == "later"


def test_reports_are_bounded_and_counts_cover_the_whole_run() -> None:
    spec = two_node_graph()
    record = RunProgress(run_input())
    runs = policies.REPORTS_KEPT + 5
    for visit in range(1, runs + 1):
        record.succeeded(spec.node("fetch"), visit, outcome("fetch", visit))
    record.skipped(spec.node("done"), 1, "no edge taken", datetime(2026, 11, 29, tzinfo=UTC))
    assert len(record.reports) == policies.REPORTS_KEPT
    assert record.reports[-1].status is NodeStatus.SKIPPED
    assert record.reports[-1].output_summary == "skipped: no edge taken"
    assert record.report_counts == {NodeStatus.SUCCESS: runs, NodeStatus.SKIPPED: 1}
