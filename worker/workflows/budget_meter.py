"""Counting a run's spend against its budget, and holding it at a cap (docs/graphs/budgets.md).

Workflow code: deterministic, no I/O. The figures come from activity results
(``LlmTurnResult.usage`` is priced by the ``llm_turn`` activity), so a replay
counts exactly what the run counted. A ``BudgetMeter`` counts the run's own
spend, each workstream's spend (reported by the child with its progress
signals, addressed by workflow id so they reach whichever generation runs) and
the budgets reserved for running workstreams launched with one of their own.

``gate`` runs before every LLM turn, tool call, ``tool`` node and map: with a
cap reached it never lets the step start. An LLM turn waits at the token or
cost cap; a tool call at any cap (the tool-call cap only holds tool calls, so
an agent at it may still give its final answer). While any step waits at a cap
(the run is paused) every other step waits too: nothing starts while paused.
``on_exhausted="pause"`` waits (the run's describe says ``paused``) until
``RaiseBudget`` lifts the cap or the run is cancelled; ``"fail"`` raises
``BudgetExhausted`` naming the limit. A run without a budget still counts
(describe and metrics) but never waits.

Tool calls are counted when they are admitted, before they start (``take_tools``:
no await between the check and the count), so parallel calls never overrun the
cap: a turn's batch is checked once (``check_batch``), and a map's items are
admitted as its batches are dispatched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import (
        BudgetAck,
        BudgetCarry,
        BudgetLimit,
        BudgetLimits,
        BudgetRaise,
        BudgetState,
        BudgetUsage,
        OnExhausted,
        RunBudget,
        TurnUsage,
    )
    from spindle.shared.contracts.errors import (
        BudgetExhausted,
        BudgetRefused,
        to_application_error,
    )

Step = Literal["llm", "tool"]
"""What is about to start: an LLM turn, or a tool call (tool node, map)."""

#: The caps that hold each kind of step.
_HOLDS: dict[str, tuple[BudgetLimit, ...]] = {
    "llm": (BudgetLimit.MAX_LLM_TOKENS, BudgetLimit.MAX_COST_USD),
    "tool": tuple(BudgetLimit),
}

Notify = Callable[[str, dict[str, Any]], Awaitable[None]]
"""Posts a WARNING (text, details) on the run's stream."""


def _field(limit: BudgetLimit) -> str:
    return {
        BudgetLimit.MAX_LLM_TOKENS: "llm_tokens",
        BudgetLimit.MAX_TOOL_CALLS: "tool_calls",
        BudgetLimit.MAX_COST_USD: "cost_usd",
    }[limit]


def reached(
    limits: BudgetLimits, usage: BudgetUsage, among: tuple[BudgetLimit, ...] = tuple(BudgetLimit)
) -> BudgetLimit | None:
    """The first cap of ``among`` that ``usage`` has reached, else None."""
    for limit in among:
        cap = getattr(limits, limit.value)
        if cap is not None and getattr(usage, _field(limit)) >= cap:
            return limit
    return None


def _at_least(usage: BudgetUsage, limits: BudgetLimits) -> BudgetUsage:
    """Per field, the larger of ``usage`` and the cap (a reservation holds its whole cap)."""
    return BudgetUsage(
        llm_tokens=max(usage.llm_tokens, limits.max_llm_tokens or 0),
        tool_calls=max(usage.tool_calls, limits.max_tool_calls or 0),
        cost_usd=max(usage.cost_usd, limits.max_cost_usd or 0.0),
    )


class BudgetMeter:
    """One run's (or workstream's) spend and caps.

    Args:
        budget: the caps (None: count only).
        carry: what the previous generation counted (continue-as-new).
        notify: posts the WARNING that the run stops at a cap, and the resume.
    """

    def __init__(
        self, budget: BudgetLimits | None, carry: BudgetCarry | None, notify: Notify
    ) -> None:
        limits = budget if budget is not None else BudgetLimits()
        self._limits = BudgetLimits.model_validate(limits.model_dump(include=_LIMIT_FIELDS))
        self._on_exhausted: OnExhausted = (
            budget.on_exhausted if isinstance(budget, RunBudget) else "pause"
        )
        self._given = budget is not None
        self._own = BudgetUsage()
        self._children: dict[str, BudgetUsage] = {}
        self._reserved: dict[str, BudgetLimits] = {}
        self._notify = notify
        self._waiting: dict[Step, int] = {"llm": 0, "tool": 0}
        self._following = 0  # steps waiting only because the run is paused
        self._announced: BudgetLimit | None = None
        if carry is not None:
            self._limits = carry.limits
            self._own = carry.own
            self._children = dict(carry.children)
            self._reserved = dict(carry.reserved)

    @property
    def limited(self) -> bool:
        """Some cap is set."""
        return not self._limits.is_empty()

    @property
    def shown(self) -> bool:
        """The run has a budget to show (describe, result) and carry: one given at
        its start, or caps raised since."""
        return self._given or self.limited

    @property
    def paused(self) -> bool:
        """A step waits at a cap (or with the run paused at one)."""
        return any(self._waiting.values()) or self._following > 0

    def _held(self) -> bool:
        return any(n and self.exhausted(step) is not None for step, n in self._waiting.items())

    @property
    def holds_workstreams(self) -> bool:
        """The run's workstreams (those without a budget of their own) must pause:
        a step of the run waits at a cap, or (``on_exhausted: pause``) a cap that
        holds LLM turns is reached, so any further turn of theirs would overshoot it."""
        if self._held():
            return True
        return self._on_exhausted == "pause" and self.exhausted("llm") is not None

    def holding(self) -> tuple[BudgetLimit, str]:
        """The cap that holds the run's workstreams, and a sentence with its figures."""
        limit = self.exhausted("llm") or self.exhausted() or BudgetLimit.MAX_LLM_TOKENS
        return limit, self._exhausted_text(limit)

    @property
    def own(self) -> BudgetUsage:
        """This run's own spend (not its workstreams')."""
        return self._own

    def usage(self) -> BudgetUsage:
        """The run's own spend plus every workstream's."""
        total = self._own
        for spent in self._children.values():
            total = total.plus(spent)
        return total

    def _committed(self) -> BudgetUsage:
        """Spend plus what running workstreams hold reserved beyond their spend."""
        total = self._own
        for launch_id, spent in self._children.items():
            reserved = self._reserved.get(launch_id)
            total = total.plus(spent if reserved is None else _at_least(spent, reserved))
        for launch_id, reserved in self._reserved.items():
            if launch_id not in self._children:
                total = total.plus(_at_least(BudgetUsage(), reserved))
        return total

    def exhausted(self, step: Step | None = None) -> BudgetLimit | None:
        """The cap reached (spend and reservations count) that holds ``step`` (any
        step: None), else None."""
        if not self.limited:
            return None
        among = _HOLDS[step] if step is not None else tuple(BudgetLimit)
        return reached(self._limits, self._committed(), among)

    # -- counting ----------------------------------------------------------------------

    def llm_used(self, usage: TurnUsage | None) -> None:
        """Count one LLM turn (a provider that reported no usage counts nothing)."""
        if usage is not None:
            self._own = self._own.plus(
                BudgetUsage(
                    llm_tokens=usage.prompt_tokens + usage.completion_tokens,
                    cost_usd=usage.cost_usd,
                )
            )

    def tools_used(self, count: int = 1) -> None:
        """Count tool calls (an agent's, a ``tool`` node, a map's items)."""
        self._own = self._own.plus(BudgetUsage(tool_calls=count))

    def child_used(self, launch_id: str, usage: BudgetUsage) -> None:
        """A workstream's spend so far (cumulative: the latest report replaces the last)."""
        self._children[launch_id] = usage

    def child_ended(self, launch_id: str) -> None:
        """A workstream ended: its reservation is released, its spend stays counted."""
        self._reserved.pop(launch_id, None)

    # -- reservations and raises: checks raise ApplicationErrors ------------------------

    def check_reserve(self, limits: BudgetLimits) -> None:
        """Refuse (``BudgetRefused``) a child budget larger than the run's remainder."""
        if not self.limited:
            return
        committed = self._committed()
        for limit in BudgetLimit:
            cap, wanted = getattr(self._limits, limit.value), getattr(limits, limit.value)
            if cap is None:
                continue
            left = cap - getattr(committed, _field(limit))
            if wanted is None or wanted > left:
                raise to_application_error(
                    BudgetRefused(
                        f"the workstream's budget does not fit the run's remainder: "
                        f"{limit.value} {wanted if wanted is not None else 'unlimited'} "
                        f"asked, {max(left, 0)} left",
                        context={"limit": limit.value, "asked": wanted, "left": max(left, 0)},
                    )
                )

    def reserve(self, launch_id: str, limits: BudgetLimits) -> None:
        """Set a child's budget aside (after ``check_reserve``)."""
        self._reserved[launch_id] = limits

    def check_raise(self, raised: BudgetRaise) -> None:
        """Refuse (``BudgetRefused``) a new cap below what was already spent."""
        usage = self._committed()
        for limit in BudgetLimit:
            wanted = getattr(raised, limit.value)
            spent = getattr(usage, _field(limit))
            if wanted is not None and wanted < spent:
                raise to_application_error(
                    BudgetRefused(
                        f"{limit.value} {wanted} is below what the run has spent ({spent})",
                        context={"limit": limit.value, "asked": wanted, "spent": spent},
                    )
                )

    def raise_limits(self, raised: BudgetRaise) -> bool:
        """Apply new caps; True if the run was held at a cap and no longer is."""
        self.check_raise(raised)
        held = self._held()
        given = raised.model_dump(exclude_none=True)
        self._limits = self._limits.model_copy(update=given)
        return held and not self._held()

    def raise_budget(self, raised: BudgetRaise) -> BudgetAck:
        """The ``raise_budget`` update: raise the caps; a run held at a cap resumes
        when none is reached."""
        resumed = self.raise_limits(raised)
        return BudgetAck(budget=self.state(), resumed=resumed)

    # -- the gate ------------------------------------------------------------------------

    async def gate(self, step: Step) -> None:
        """Before an LLM turn or tool call: return at once, wait at a cap, or fail.

        Raises:
            ApplicationError: ``BudgetExhausted`` (non-retryable) at a cap when
                the budget says ``on_exhausted: fail``.
        """
        limit = self.exhausted(step)
        if limit is None:
            if not self._held():
                return
            # Another step waits at a cap: the run is paused, this step waits with it.
            await self._wait_held(step)
            return
        text = self._exhausted_text(limit)
        if self._on_exhausted == "fail":
            raise to_application_error(
                BudgetExhausted(
                    f"{text}; the budget says on_exhausted: fail", context=self._facts()
                )
            )
        self._waiting[step] += 1
        announcer = self._announced is None
        try:
            if announcer:
                self._announced = limit
                await self._notify(
                    f"{text}: the run is paused until its budget is raised "
                    "(POST /runs/<id>/budget)",
                    {"budget": self._facts(), "paused": True},
                )
            await workflow.wait_condition(lambda: self._may_start(step))
        finally:
            self._waiting[step] -= 1
        if announcer:
            self._announced = None
            await self._notify("budget raised: the run resumes", {"budget": self._facts()})

    def _may_start(self, step: Step) -> bool:
        """No cap holds ``step`` and no other step waits at a cap."""
        return self.exhausted(step) is None and not self._held()

    async def _wait_held(self, step: Step | None) -> None:
        """Wait with the paused run (not counted as held at a cap itself)."""
        self._following += 1
        try:
            await workflow.wait_condition(
                lambda: not self._held() if step is None else self._may_start(step)
            )
        finally:
            self._following -= 1

    async def hold(self) -> None:
        """Before a step that spends nothing (a router, an output node, a child
        launch): return at once unless the run is paused, else wait with it."""
        if self._held():
            await self._wait_held(None)

    # -- admitting tool calls: checked and counted with no await between ---------------

    def _allowance(self, wanted: int) -> int:
        """How many of ``wanted`` tool calls may start now (0 while held or at a cap)."""
        if not self.limited:
            return wanted
        if self._held() or self.exhausted("tool") is not None:
            return 0
        cap = self._limits.max_tool_calls
        if cap is None:
            return wanted
        return max(0, min(wanted, cap - self._committed().tool_calls))

    def check_batch(self, count: int) -> None:
        """Before a turn's ``count`` tool calls start: with ``on_exhausted: fail``,
        fail unless all of them fit (none runs); with ``pause`` nothing happens
        here, the calls over the allowance wait in ``take_tools``.

        Raises:
            ApplicationError: ``BudgetExhausted`` (non-retryable).
        """
        if count <= 0 or self._on_exhausted != "fail" or self._allowance(count) >= count:
            return
        limit = self.exhausted("tool") or BudgetLimit.MAX_TOOL_CALLS
        cap = getattr(self._limits, limit.value)
        spent = getattr(self._committed(), _field(limit))
        raise to_application_error(
            BudgetExhausted(
                f"budget exhausted: {limit.value} reached ({spent} of {cap}; "
                f"{count} tool calls asked); the budget says on_exhausted: fail",
                context=self._facts(),
            )
        )

    def admit_tools(self, wanted: int) -> int:
        """Admit and count up to ``wanted`` tool calls now (synchronous); how many."""
        granted = self._allowance(wanted)
        if granted:
            self.tools_used(granted)
        return granted

    async def take_tools(self, wanted: int = 1) -> int:
        """Admit at least one of ``wanted`` tool calls (a map's items: up to
        ``wanted``), waiting at a cap; they are counted before this returns.

        Raises:
            ApplicationError: ``BudgetExhausted`` at a cap with ``on_exhausted: fail``.
        """
        if wanted <= 0:
            return 0
        while True:
            granted = self.admit_tools(wanted)
            if granted:
                return granted
            # Waits until a raise (or fails); another waiter may take what the
            # raise freed first, so admit again.
            await self.gate("tool")

    def _exhausted_text(self, limit: BudgetLimit) -> str:
        cap = getattr(self._limits, limit.value)
        spent = getattr(self._committed(), _field(limit))
        return f"budget exhausted: {limit.value} reached ({spent} of {cap})"

    def _facts(self) -> dict[str, Any]:
        return self.state().model_dump(mode="json", exclude_none=True)

    # -- describe and carry -------------------------------------------------------------

    def state(self) -> BudgetState:
        """Caps, spend (workstreams included), reservations and the cap reached."""
        reserved = BudgetUsage()
        for limits in self._reserved.values():
            reserved = reserved.plus(_at_least(BudgetUsage(), limits))
        return BudgetState(
            limits=self._limits,
            on_exhausted=self._on_exhausted,
            usage=self.usage(),
            reserved=reserved,
            exhausted=self.exhausted(),
            paused=self.paused,
        )

    def carry(self) -> BudgetCarry:
        """What the next generation needs (continue-as-new)."""
        return BudgetCarry(
            limits=self._limits,
            own=self._own,
            children=dict(self._children),
            reserved=dict(self._reserved),
        )


_LIMIT_FIELDS = set(BudgetLimits.model_fields)
