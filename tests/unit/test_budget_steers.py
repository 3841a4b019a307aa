"""A child's steering book keeps the parent's budget hold apart from a user's pause
(docs/graphs/budgets.md, "Workstreams at a cap")."""

from __future__ import annotations

from typing import Literal

from spindle.shared.contracts.workstreams import SteerCommand, SteerDirective, WorkstreamCarry
from spindle.worker.workflows.workstreams.child_steering import SteeringBook

PAUSE, RESUME = SteerCommand.PAUSE_REQUESTED, SteerCommand.RESUME_REQUESTED


def _steer(
    book: SteeringBook, n: int, command: SteerCommand, origin: Literal["user", "budget"] = "user"
) -> None:
    book.queue.append(SteerDirective(steer_id=f"s-{n}", command=command, origin=origin))


def test_a_users_resume_does_not_lift_the_budgets_hold() -> None:
    book = SteeringBook()
    _steer(book, 1, PAUSE, "budget")
    _steer(book, 2, PAUSE)
    _steer(book, 3, RESUME)
    _steer(book, 4, RESUME)
    held, paused, resumed, again = book.apply_queued(1)
    assert held.applied and paused.applied and book.budget_held
    assert (
        resumed.applied
        and resumed.reason is not None
        and "held by the run's budget" in resumed.reason
    )
    assert (
        not again.applied
        and again.reason is not None
        and "held by the run's budget" in again.reason
    )
    assert book.holding and not book.paused

    _steer(book, 5, RESUME, "budget")
    [released] = book.apply_queued(2)
    assert released.applied and not book.holding


def test_the_budgets_hold_is_carried_across_continue_as_new() -> None:
    book = SteeringBook(WorkstreamCarry(budget_held=True))
    assert book.holding and not book.paused
