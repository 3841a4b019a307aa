"""Budget arithmetic (``BudgetMeter`` outside a workflow: counting, caps,
reservations, raises), model prices, and the spend metrics."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.budgets import (
    BudgetCarry,
    BudgetLimit,
    BudgetLimits,
    BudgetRaise,
    BudgetUsage,
    RunBudget,
    TurnUsage,
)
from spindle.shared.contracts.errors import BudgetRefused
from spindle.shared.platform import metrics
from spindle.shared.platform.settings import ModelPrice, Settings
from spindle.worker.workflows.budget_meter import BudgetMeter


async def _never(text: str, details: dict[str, Any]) -> None:
    raise AssertionError("nothing is posted outside a gate")


def meter(**caps: Any) -> BudgetMeter:
    return BudgetMeter(RunBudget(**caps), None, _never)


def test_turns_and_tool_calls_add_up_and_the_first_reached_cap_is_named() -> None:
    budget = meter(max_llm_tokens=100, max_tool_calls=2)
    budget.llm_used(TurnUsage(prompt_tokens=40, completion_tokens=10, cost_usd=0.25))
    budget.tools_used()
    assert budget.usage() == BudgetUsage(llm_tokens=50, tool_calls=1, cost_usd=0.25)
    assert budget.exhausted() is None
    budget.tools_used()
    assert budget.exhausted() is BudgetLimit.MAX_TOOL_CALLS
    assert budget.exhausted("llm") is None, "the tool-call cap does not hold LLM turns"
    assert budget.exhausted("tool") is BudgetLimit.MAX_TOOL_CALLS
    budget.llm_used(TurnUsage(prompt_tokens=50))
    assert budget.exhausted("llm") is BudgetLimit.MAX_LLM_TOKENS


def test_without_caps_it_counts_but_never_holds() -> None:
    budget = BudgetMeter(None, None, _never)
    budget.llm_used(TurnUsage(prompt_tokens=10**9))
    budget.llm_used(None)  # a provider that reports nothing counts nothing
    assert not budget.limited
    assert budget.exhausted() is None
    assert budget.usage().llm_tokens == 10**9


def test_children_count_and_reservations_hold_the_remainder() -> None:
    budget = meter(max_llm_tokens=1000)
    budget.llm_used(TurnUsage(prompt_tokens=100))
    budget.check_reserve(BudgetLimits(max_llm_tokens=900))
    with pytest.raises(ApplicationError) as refused:
        budget.check_reserve(BudgetLimits(max_llm_tokens=901))
    assert refused.value.type == BudgetRefused.application_type
    assert "900 left" in refused.value.message
    with pytest.raises(ApplicationError):  # no token cap: the child's tokens are unbounded
        budget.check_reserve(BudgetLimits(max_tool_calls=5))

    budget.reserve("ws-1", BudgetLimits(max_llm_tokens=600))
    budget.child_used("ws-1", BudgetUsage(llm_tokens=200))
    assert budget.usage().llm_tokens == 300, "spend: own + the child's"
    assert budget.state().reserved.llm_tokens == 600
    with pytest.raises(ApplicationError):
        budget.check_reserve(BudgetLimits(max_llm_tokens=301))
    budget.child_used("ws-1", BudgetUsage(llm_tokens=250))  # cumulative: replaces
    budget.child_ended("ws-1")
    assert budget.usage().llm_tokens == 350
    budget.check_reserve(BudgetLimits(max_llm_tokens=650))


def test_a_raise_below_the_spend_is_refused_and_other_caps_stay() -> None:
    budget = meter(max_llm_tokens=10, max_cost_usd=1.0)
    budget.llm_used(TurnUsage(prompt_tokens=30))
    with pytest.raises(ApplicationError) as refused:
        budget.check_raise(BudgetRaise(max_llm_tokens=29))
    assert "max_llm_tokens 29 is below what the run has spent (30)" in refused.value.message
    assert budget.raise_limits(BudgetRaise(max_llm_tokens=50)) is False, "nothing was waiting"
    state = budget.state()
    assert state.limits == BudgetLimits(max_llm_tokens=50, max_cost_usd=1.0)
    assert state.exhausted is None


def test_the_carry_restores_the_count_of_an_earlier_generation() -> None:
    first = meter(max_tool_calls=10, on_exhausted="fail")
    first.tools_used(7)
    first.child_used("ws-2", BudgetUsage(tool_calls=2))
    carry = BudgetCarry.model_validate(first.carry().model_dump(mode="json"))
    second = BudgetMeter(RunBudget(max_tool_calls=10, on_exhausted="fail"), carry, _never)
    assert second.usage().tool_calls == 9
    assert second.state().on_exhausted == "fail"


def test_model_prices_are_read_from_json_and_price_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "SPINDLE_MODEL_PRICES", '{"m": {"input_per_1k": 0.5, "output_per_1k": 2}, "*": {}}'
    )
    prices = Settings().model_prices
    assert prices["m"].cost(2000, 500) == pytest.approx(2.0)
    assert prices["*"] == ModelPrice()


def test_spend_metrics_count_per_tenant_and_graph() -> None:
    def value(name: str, **labels: str) -> float:
        return metrics.REGISTRY.get_sample_value(name, labels) or 0.0

    tokens = value("agent_llm_tokens_total", tenant="t-unit", graph="g-unit", kind="prompt")
    metrics.llm_used("t-unit", "g-unit", 12, 3, 0.5)
    metrics.tool_called("t-unit", "g-unit", 4)
    assert (
        value("agent_llm_tokens_total", tenant="t-unit", graph="g-unit", kind="prompt")
        == tokens + 12
    )
    assert value("agent_llm_tokens_total", tenant="t-unit", graph="g-unit", kind="completion") >= 3
    assert value("agent_tool_calls_total", tenant="t-unit", graph="g-unit") >= 4
    assert value("agent_llm_cost_usd_total", tenant="t-unit", graph="g-unit") >= 0.5


def test_tool_calls_are_admitted_and_counted_before_they_start_never_past_the_cap() -> None:
    budget = meter(max_tool_calls=3)
    assert budget.admit_tools(2) == 2
    assert budget.usage().tool_calls == 2, "counted when admitted"
    assert budget.admit_tools(5) == 1, "only what is left"
    assert budget.admit_tools(1) == 0
    assert budget.usage().tool_calls == 3
    budget.check_batch(4)  # pause: the calls over the allowance wait, nothing raised here
    unlimited = BudgetMeter(None, None, _never)
    assert unlimited.admit_tools(50) == 50


def test_with_on_exhausted_fail_a_batch_over_what_is_left_fails_before_any_call() -> None:
    budget = meter(max_tool_calls=2, on_exhausted="fail")
    budget.check_batch(2)
    assert budget.admit_tools(1) == 1
    with pytest.raises(ApplicationError) as failed:
        budget.check_batch(2)
    assert "budget exhausted: max_tool_calls reached (1 of 2; 2 tool calls asked)" in str(
        failed.value
    )
    assert budget.usage().tool_calls == 1, "nothing of the refused batch was counted"
    tokens = meter(max_llm_tokens=10, on_exhausted="fail")
    tokens.llm_used(TurnUsage(prompt_tokens=11))
    with pytest.raises(ApplicationError, match="max_llm_tokens"):
        tokens.check_batch(1)
    assert tokens.admit_tools(1) == 0, "the token cap holds tool calls too"
