"""``BudgetHolds``: a run held at its budget holds its running workstreams too.

While the run's budget holds (``BudgetMeter.holds_workstreams``), each running child
without a budget of its own gets a ``pause_requested`` steer of origin ``budget``,
and ``resume_requested`` once a raise releases the run; a user's resume does not
lift that hold (docs/graphs/budgets.md, "Workstreams at a cap"). A child with its
own budget is never held: its spend is bounded by its reservation, which the run's
caps already count, so holding it could deadlock the run.

Runs inside the workflow sandbox: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.errors import BudgetRefused, to_application_error
    from spindle.shared.contracts.workstreams import (
        CHILD_STEER_SIGNAL,
        SteerCommand,
        SteerDirective,
        WorkstreamState,
    )
    from spindle.worker.workflows.budget_meter import BudgetMeter
    from spindle.worker.workflows.workstreams.parent_supervised_child import SupervisedChild

#: Runs recorded before children were held let them run on at a cap.
BUDGET_HOLDS_WORKSTREAMS_PATCH = "budget-holds-workstreams"


class BudgetHolds:
    """Holds and releases a parent's running children with its budget.

    Args:
        meter: the run's budget.
        children: the supervisor's children, by launch id (read, never changed here).
        next_steer_id: gives the next steer id (``s-<n>``, shared with user steers).
    """

    def __init__(
        self,
        meter: BudgetMeter,
        children: dict[str, SupervisedChild],
        next_steer_id: Callable[[], str],
    ) -> None:
        self._meter = meter
        self._children = children
        self._next_steer_id = next_steer_id
        self._follower: asyncio.Task[None] | None = None

    def check_not_held(self) -> None:
        """Raises ``BudgetRefused`` naming the cap while the run's budget holds its
        workstreams: the ``LaunchWorkstream`` update is refused then rather than left
        waiting for a raise that may take days (docs/graphs/budgets.md)."""
        if not self._meter.holds_workstreams:
            return
        limit, text = self._meter.holding()
        raise self._refusal(
            BudgetRefused(
                f"{text}: the run is paused at its budget and launches no workstream "
                "until the budget is raised (POST /runs/<id>/budget)",
                context={"limit": limit.value, "paused": True},
            )
        )

    @staticmethod
    def _refusal(error: BudgetRefused) -> ApplicationError:
        return to_application_error(error)

    def follow(self) -> None:
        """Start, once, the task that holds and releases children with the budget."""
        if self._follower is None:
            self._follower = asyncio.create_task(self._hold_with_budget())

    def _out_of_step(self) -> list[SupervisedChild]:
        """Running children (without a budget of their own) whose hold differs from
        the run's."""
        hold = self._meter.holds_workstreams
        return [
            c
            for c in self._children.values()
            if c.started
            and c.state is WorkstreamState.RUNNING
            and c.request.budget is None
            and c.budget_held != hold
        ]

    async def _hold_with_budget(self) -> None:
        while True:
            await workflow.wait_condition(lambda: bool(self._out_of_step()))
            if not workflow.patched(BUDGET_HOLDS_WORKSTREAMS_PATCH):
                return  # recorded before children were held: they ran on
            hold = self._meter.holds_workstreams
            command = SteerCommand.PAUSE_REQUESTED if hold else SteerCommand.RESUME_REQUESTED
            text = self._meter.holding()[1] if hold else "the run's budget was raised"
            for child in self._out_of_step():
                child.budget_held = hold
                directive = SteerDirective(
                    steer_id=self._next_steer_id(), command=command, text=text, origin="budget"
                )
                await child.signal(CHILD_STEER_SIGNAL, directive)
