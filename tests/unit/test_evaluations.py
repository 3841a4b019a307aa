"""Evaluations' pure parts: the request's rules, how a check passes, the summary
(docs/replay-and-compare.md#evaluations)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spindle.shared.contracts.evaluations import (
    CheckResult,
    EvaluationCheck,
    EvaluationRequest,
    EvaluationRunEntry,
    SpendTotals,
)
from spindle.shared.store.evaluations import summarize
from spindle.worker.activities.evaluation import expression_checks, scored

pytestmark = pytest.mark.unit

DOCUMENT = {
    "source": {"output": {"priority": "normal"}, "totals": {"cost": 0.2, "tokens": 10}},
    "candidate": {"output": {"priority": "high"}, "totals": {"cost": 0.1, "tokens": 4}},
}


def test_a_request_names_what_is_wrong() -> None:
    with pytest.raises(ValidationError, match="give run_ids, or graph"):
        EvaluationRequest.model_validate({"source": {}})
    with pytest.raises(ValidationError, match="not both"):
        EvaluationRequest.model_validate({"source": {"run_ids": ["a"], "graph": "g"}})
    with pytest.raises(ValidationError, match="give expr or graph"):
        EvaluationCheck.model_validate({"name": "x", "expr": "a", "graph": "g"})
    with pytest.raises(ValidationError, match="names must be unique"):
        EvaluationRequest.model_validate(
            {"source": {"graph": "g"}, "checks": [{"name": "x", "expr": "a"}] * 2}
        )
    with pytest.raises(ValidationError, match="graph or graph_spec, not both"):
        EvaluationRequest.model_validate(
            {"source": {"graph": "g"}, "candidate": {"graph": "g", "graph_spec": {}}}
        )
    request = EvaluationRequest.model_validate({"source": {"graph": "g"}})
    fork = request.fork_request()
    assert (fork.tools, fork.llm, fork.on_miss) == ("recorded", "live", "fail")
    assert request.source.status == "completed"


def test_an_expression_check_passes_on_a_truthy_value() -> None:
    checks = [
        EvaluationCheck(name="same", expr="source.output.priority == candidate.output.priority"),
        EvaluationCheck(name="cheaper", expr="candidate.totals.cost < source.totals.cost"),
        EvaluationCheck(name="empty", expr="candidate.output.missing"),
        EvaluationCheck(name="judge", graph="judge"),  # a graph: not evaluated here
    ]
    results = expression_checks(checks, DOCUMENT)
    assert set(results) == {"same", "cheaper", "empty"}
    assert results["same"] == CheckResult(passed=False, value=False)
    assert results["cheaper"] == CheckResult(passed=True, value=True)
    assert results["empty"].passed is False


def test_a_scoring_graph_passes_with_passed_true_or_a_truthy_output() -> None:
    assert scored({"passed": True, "why": "x"}, "completed", "r").passed is True
    assert scored({"passed": "yes"}, "completed", "r").passed is False
    assert scored(0.9, "completed", "r").passed is True
    assert scored([], "completed", "r").passed is False
    failed = scored({"passed": True}, "failed", "r")
    assert failed.passed is False and failed.error == "scoring run ended failed"


def test_the_summary_counts_outcomes_checks_and_deltas() -> None:
    entries = [
        EvaluationRunEntry(
            index=0,
            source_id="a",
            outcome="same",
            checks={"c": CheckResult(passed=True)},
            source_totals=SpendTotals(tokens=10, cost=0.5, duration_ms=100),
            candidate_totals=SpendTotals(tokens=4, cost=0.25, duration_ms=150),
        ),
        EvaluationRunEntry(
            index=1, source_id="b", outcome="changed", checks={"c": CheckResult(passed=False)}
        ),
        EvaluationRunEntry(index=2, source_id="c", outcome="failed"),
        EvaluationRunEntry(index=3, source_id="d"),
    ]
    summary = summarize(entries)
    assert (summary.runs, summary.same, summary.changed, summary.failed, summary.pending) == (
        4,
        1,
        1,
        1,
        1,
    )
    assert summary.checks["c"].passed == 1 and summary.checks["c"].failed == 1
    assert summary.delta == SpendTotals(tokens=-6, cost=-0.25, duration_ms=50)


def test_stored_times_are_answered_with_their_utc_offset() -> None:
    from datetime import datetime

    from spindle.shared.contracts.evaluations import EvaluationListItem

    # MongoDB hands datetimes back naive: the answer must still be an RFC 3339 date-time.
    item = EvaluationListItem(
        evaluation_id="eval-1",
        status="completed",
        created_at=datetime(2026, 11, 29, 16, 22, 12),
        updated_at=datetime(2026, 11, 29, 16, 22, 13),
        runs=1,
        done=1,
    )
    dumped = item.model_dump(mode="json")
    assert dumped["created_at"] == "2026-11-29T16:22:12Z"
    assert dumped["updated_at"] == "2026-11-29T16:22:13Z"
