"""``RunDeadline`` and the budget's update answers: what a run shows and carries."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.budgets import BudgetCarry, BudgetLimits, BudgetRaise, RunBudget
from spindle.shared.contracts.runs import (
    CarriedState,
    SchedulerSnapshot,
)
from spindle.worker.workflows.budget_meter import BudgetMeter
from spindle.worker.workflows.run_deadline import RunDeadline
from tests.workflow.run_parts import no_notice, run_input

pytestmark = pytest.mark.unit


def test_a_run_without_a_deadline_has_no_timer() -> None:
    deadline = RunDeadline(run_input())
    assert deadline.at is None and deadline.iso is None
    assert deadline.watch() is None
    assert not deadline.passed


def test_a_continued_run_keeps_the_first_generations_deadline() -> None:
    carried = CarriedState(
        first_run_id="run-1",
        scheduler=SchedulerSnapshot(),
        deadline_at="2026-11-29T10:00:00+00:00",
    )
    deadline = RunDeadline(run_input(deadline_seconds=60, carried=carried))
    assert deadline.iso == "2026-11-29T10:00:00+00:00"
    assert deadline.error == "the run passed its deadline (60 s) and was stopped"


def test_the_budget_is_shown_when_given_or_raised_later() -> None:
    assert not BudgetMeter(None, None, no_notice).shown
    assert BudgetMeter(RunBudget(), None, no_notice).shown
    raised = BudgetMeter(None, None, no_notice)
    ack = raised.raise_budget(BudgetRaise(max_tool_calls=5))
    assert raised.shown
    assert ack.budget.limits.max_tool_calls == 5
    assert not ack.resumed


def test_a_raise_below_the_spend_is_refused() -> None:
    carry = BudgetCarry(limits=BudgetLimits(max_tool_calls=10))
    meter = BudgetMeter(RunBudget(max_tool_calls=10), carry, no_notice)
    meter.tools_used(4)
    with pytest.raises(ApplicationError) as refused:
        meter.raise_budget(BudgetRaise(max_tool_calls=3))
    assert refused.value.type == "BudgetRefused"
    assert meter.state().limits.max_tool_calls == 10
