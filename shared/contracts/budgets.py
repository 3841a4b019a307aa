"""Budgets and deadlines of a run (docs/graphs/budgets.md).

A run may carry a ``RunBudget``: caps on LLM tokens, tool calls and cost. The
workflow counts usage durably from each ``llm_turn`` / ``tool_call`` result
(tokens and cost from the activity's result, so a replay counts the same), a
workstream's spend included. When a cap is reached the run does not start its
next LLM turn or tool call: it pauses (``on_exhausted="pause"``) until
``RaiseBudget`` raises the cap, or fails naming the limit (``"fail"``).

Deadlines flow down: a run's ``deadline_seconds`` bounds its workstreams (a
child's deadline is the smaller of its own and the parent's remaining time);
``ExtendWorkstreamDeadline`` extends a child within the parent's. The run's
``children_policy`` says what its cancel or deadline does to running children.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RAISE_BUDGET_UPDATE = "RaiseBudget"
EXTEND_WORKSTREAM_DEADLINE_UPDATE = "ExtendWorkstreamDeadline"

OnExhausted = Literal["pause", "fail"]
ChildrenPolicy = Literal["cancel_children", "let_finish"]

#: Run deadlines, seconds: at least a minute, at most 30 days.
RUN_DEADLINE_MIN_SECONDS = 60
RUN_DEADLINE_MAX_SECONDS = 30 * 24 * 3600
#: One extension of a workstream's deadline, seconds.
EXTEND_MAX_SECONDS = 1800


class BudgetLimit(StrEnum):
    """The limits a budget may set; the names the stream and describe use."""

    MAX_LLM_TOKENS = "max_llm_tokens"
    MAX_TOOL_CALLS = "max_tool_calls"
    MAX_COST_USD = "max_cost_usd"


class BudgetLimits(BaseModel):
    """Caps on what a run (or a workstream) may spend; None: no cap."""

    model_config = ConfigDict(extra="forbid")

    max_llm_tokens: int | None = Field(
        None, ge=1, le=10**12, description="prompt + completion tokens over all LLM turns"
    )
    max_tool_calls: int | None = Field(
        None, ge=1, le=10**9, description="tool calls, tool nodes and map items"
    )
    max_cost_usd: float | None = Field(
        None,
        gt=0,
        le=10**9,
        description="cost in USD (tokens times the model's price, setting SPINDLE_MODEL_PRICES)",
    )

    def is_empty(self) -> bool:
        """No cap set."""
        return self.max_llm_tokens is None and (
            self.max_tool_calls is None and self.max_cost_usd is None
        )


class RunBudget(BudgetLimits):
    """``POST /runs`` ``budget``: the caps and what happens at one."""

    on_exhausted: OnExhausted = Field(
        "pause",
        description="pause: wait before the next LLM turn or tool call until raised; "
        "fail: fail the run naming the limit",
    )


class BudgetUsage(BaseModel):
    """What was spent so far."""

    llm_tokens: int = 0
    tool_calls: int = 0
    cost_usd: float = 0.0

    def plus(self, other: BudgetUsage) -> BudgetUsage:
        """The sum of both."""
        return BudgetUsage(
            llm_tokens=self.llm_tokens + other.llm_tokens,
            tool_calls=self.tool_calls + other.tool_calls,
            cost_usd=round(self.cost_usd + other.cost_usd, 9),
        )


class TurnUsage(BaseModel):
    """One LLM turn's spend, reported by the ``llm_turn`` activity."""

    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class BudgetState(BaseModel):
    """A run's budget in ``GET /runs/{id}``: caps, spend and the cap reached."""

    limits: BudgetLimits
    on_exhausted: OnExhausted = "pause"
    usage: BudgetUsage = Field(
        default_factory=BudgetUsage, description="the run's own spend plus its workstreams'"
    )
    reserved: BudgetUsage = Field(
        default_factory=BudgetUsage,
        description="set aside for running workstreams launched with their own budget",
    )
    exhausted: BudgetLimit | None = Field(None, description="the cap reached, if any")
    paused: bool = Field(False, description="the run waits for a raise")


class BudgetCarry(BaseModel):
    """The budget across a continue-as-new (``CarriedState.budget``)."""

    limits: BudgetLimits
    own: BudgetUsage = Field(default_factory=BudgetUsage)
    children: dict[str, BudgetUsage] = Field(
        default_factory=dict, description="launch id → the child's spend so far"
    )
    reserved: dict[str, BudgetLimits] = Field(
        default_factory=dict, description="launch id → budget reserved for a running child"
    )


class BudgetRaise(BaseModel):
    """``POST /runs/{id}/budget``: new caps (only those given change)."""

    model_config = ConfigDict(extra="forbid")

    max_llm_tokens: int | None = Field(None, ge=1, le=10**12)
    max_tool_calls: int | None = Field(None, ge=1, le=10**9)
    max_cost_usd: float | None = Field(None, gt=0, le=10**9)


class BudgetAck(BaseModel):
    """The budget after a raise."""

    budget: BudgetState
    resumed: bool = Field(description="the run was paused at a cap and now goes on")


class DeadlineExtension(BaseModel):
    """``POST /runs/{id}/workstreams/{launch_id}/deadline``."""

    model_config = ConfigDict(extra="forbid")

    extend_seconds: int = Field(ge=1, le=EXTEND_MAX_SECONDS, description="seconds to add")


class ExtendWorkstreamDeadline(BaseModel):
    """The parent's update: extend one child's deadline."""

    launch_id: str = Field(min_length=1, max_length=200)
    extension: DeadlineExtension


class DeadlineAck(BaseModel):
    """A workstream's deadline after an extension."""

    launch_id: str
    deadline_seconds: float = Field(description="the child's deadline from its launch")
    deadline_at: str = Field(description="ISO 8601 (workflow time)")
