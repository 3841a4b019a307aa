"""The run's own deadline (``deadline_seconds``, docs/graphs/budgets.md).

Set once, when the first generation starts, as an absolute workflow time; a
generation that continues as new carries that time (``CarriedState.deadline_at``),
so the deadline does not move. ``watch`` is one durable timer to it; the engine
stops the run as ``timed_out`` once it has passed.

Workflow code: deterministic, no I/O; the clock is ``workflow.now()``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.runs import GraphRunInput


class RunDeadline:
    """When the run must have ended (None: no deadline), and whether that time has come.

    Args:
        run_input: the run's input: its ``deadline_seconds``, or the absolute time
            a previous generation carried.
    """

    def __init__(self, run_input: GraphRunInput) -> None:
        carried = run_input.carried
        self._seconds = run_input.deadline_seconds
        self.at: datetime | None = None
        if carried is not None and carried.deadline_at is not None:
            self.at = datetime.fromisoformat(carried.deadline_at)
        elif run_input.deadline_seconds is not None:
            self.at = workflow.now() + timedelta(seconds=run_input.deadline_seconds)
        self.passed = False

    @property
    def iso(self) -> str | None:
        """The deadline as ISO text (describe, carried state), or None."""
        return self.at.isoformat() if self.at else None

    @property
    def error(self) -> str:
        """The run's error once it was stopped at its deadline."""
        return f"the run passed its deadline ({self._seconds} s) and was stopped"

    def watch(self) -> asyncio.Task[None] | None:
        """Start the timer to the deadline (None without a deadline)."""
        return asyncio.create_task(self._wait()) if self.at else None

    async def _wait(self) -> None:
        """One durable timer to the run's deadline; at it the run stops (``timed_out``)."""
        assert self.at is not None
        remaining = (self.at - workflow.now()).total_seconds()
        if remaining > 0:
            await asyncio.sleep(remaining)
        self.passed = True
