"""What a parent knows of one launched workstream: ``ChildRecord``.

The record is the data side of a supervised child (``SupervisedChild`` in
``parent_supervised_child`` is the task side): its launch, state, phase and
progress, how it was asked to stop and how it ended, and what crosses a
continue-as-new (``carried`` / ``adopt``, docs/graphs/long-runs.md). Its line in
the ``workstreams`` query is ``info``.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Self

from temporalio import workflow
from temporalio.workflow import ChildWorkflowHandle

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import BudgetUsage
    from spindle.shared.contracts.workstreams import (
        CarriedWorkstream,
        LaunchRequest,
        Progress,
        WorkstreamInfo,
        WorkstreamOutcome,
        WorkstreamPhase,
        WorkstreamState,
    )
    from spindle.worker.contracts import RunRef

StopReason = Literal["timeout", "terminate", "parent_finished", "parent_canceled"]
SUMMARY_CHARS = 2_000


def trimmed(text: str | None) -> str | None:
    """``text`` cut to ``SUMMARY_CHARS``."""
    if text is None or len(text) <= SUMMARY_CHARS:
        return text
    return text[: SUMMARY_CHARS - 1] + "…"


@dataclass
class ChildRecord:
    """What the parent knows of one launched child (see the module docstring).

    Attributes:
        started_at: workflow time of the launch; the deadline counts from it.
        handle: set once the child workflow has started.
        stop_reason: why the parent asked it to stop (None: not asked).
        forced: it did not stop within the grace period and was cancelled.
        ended_at: workflow time its end was seen.
        merged: the parent's names of its merged artifacts.
        settled: ended, artifacts merged and the SYSTEM message posted.
        adopted: taken over from the previous parent generation (no handle).
        reported: the outcome of the child's ``WorkstreamEnded`` signal.
        steps_done: deadline-timeline steps taken (carried across generations).
        busy: a deadline step is under way (the parent does not hand over then).
        abandon: started with the parent close policy ABANDON (it outlives a parent
            generation that continues as new); adopted children always were.
        launched_by: the agent node whose ``launch_workstream`` call launched it (None:
            a ``workstream`` node or the REST API); only that agent hears its end.
        wait: its launching agent waits for it after answering (``wait: false``: not).
        heard: its end report was given to its launching agent.
        end_seq: when it settled, in the run's order of ends (0: not yet).
        budget_held: the run's budget holds it (a ``budget`` pause steer was sent;
            docs/graphs/budgets.md).
    """

    launch_id: str
    request: LaunchRequest
    child_id: str
    started_at: datetime
    parent: RunRef
    user_id: str | None
    next_steer_id: Callable[[], str]
    #: Seconds from ``started_at``: the request's, or less when the run's own
    #: deadline falls sooner; extensions add to it (0: the request's).
    deadline_seconds: int = 0
    handle: ChildWorkflowHandle[Any, WorkstreamOutcome] | None = None
    state: WorkstreamState = WorkstreamState.RUNNING
    phase: WorkstreamPhase = WorkstreamPhase.PLANNING
    tool: str | None = None
    iteration: int = 0
    latest_message: str | None = None
    stop_reason: StopReason | None = None
    forced: bool = False
    ended_at: datetime | None = None
    outcome: WorkstreamOutcome | None = None
    merged: list[str] = field(default_factory=list)
    usage: BudgetUsage | None = None
    settled: bool = False
    adopted: bool = False
    reported: WorkstreamOutcome | None = None
    steps_done: int = 0
    busy: bool = False
    abandon: bool = False
    launched_by: str | None = None
    wait: bool = True
    heard: bool = False
    end_seq: int = 0
    budget_held: bool = False
    #: Messages handed over (``hand_over``) and delivered or refused so far: each
    #: waits for the one before, so they reach the child in the order taken.
    _handed: int = 0
    _delivered: int = 0

    @property
    def started(self) -> bool:
        """Its workflow has started (a handle, or adopted from the previous generation)."""
        return self.handle is not None or self.adopted

    @property
    def portable(self) -> bool:
        """It can be handed to the next generation as it is: settled, or running
        untouched (started, not stopping, no deadline step under way)."""
        if self.settled:
            return True
        return (
            self.started
            and (self.abandon or self.adopted)
            and self.state is WorkstreamState.RUNNING
            and self.stop_reason is None
            and self.ended_at is None
            and not self.busy
            and self.deliveries_done
        )

    @property
    def deliveries_done(self) -> bool:
        """Every message handed over has been delivered (or refused on the stream)."""
        return self._delivered == self._handed

    def carried(self) -> CarriedWorkstream:
        """What the next generation needs to take this child over (``portable`` only)."""
        return CarriedWorkstream(
            launch_id=self.launch_id,
            request=self.request,
            child_id=self.child_id,
            started_at=self.started_at.isoformat(),
            state=self.state,
            phase=self.phase,
            tool=self.tool,
            iteration=self.iteration,
            latest_message=self.latest_message,
            deadline_steps_done=self.steps_done,
            deadline_seconds=self.deadline_seconds,
            reported=self.reported,
            ended_at=self.ended_at.isoformat() if self.ended_at else None,
            outcome=self.outcome,
            merged=list(self.merged),
            settled=self.settled,
            launched_by=self.launched_by,
            wait=self.wait,
            heard=self.heard,
            end_seq=self.end_seq,
            budget_held=self.budget_held,
        )

    @classmethod
    def adopt(
        cls,
        carried: CarriedWorkstream,
        *,
        parent: RunRef,
        user_id: str | None,
        next_steer_id: Callable[[], str],
    ) -> Self:
        """A child handed over by the previous generation (run ``resume`` for a live one)."""
        return cls(
            launch_id=carried.launch_id,
            request=carried.request,
            child_id=carried.child_id,
            started_at=datetime.fromisoformat(carried.started_at),
            parent=parent,
            user_id=user_id,
            next_steer_id=next_steer_id,
            state=carried.state,
            phase=carried.phase,
            tool=carried.tool,
            iteration=carried.iteration,
            latest_message=carried.latest_message,
            ended_at=datetime.fromisoformat(carried.ended_at) if carried.ended_at else None,
            outcome=carried.outcome,
            merged=list(carried.merged),
            settled=carried.settled,
            adopted=True,
            reported=carried.reported,
            steps_done=carried.deadline_steps_done,
            deadline_seconds=carried.deadline_seconds or 0,
            launched_by=carried.launched_by,
            wait=carried.wait,
            heard=carried.heard,
            end_seq=carried.end_seq,
            budget_held=carried.budget_held,
        )

    def report(self, outcome: WorkstreamOutcome) -> None:
        """The child's ``WorkstreamEnded`` signal: its own word on how it ended."""
        if self.reported is None and not self.settled:
            self.reported = outcome

    def __post_init__(self) -> None:
        if self.deadline_seconds <= 0:
            self.deadline_seconds = self.request.deadline_seconds

    def extend(self, seconds: int) -> None:
        """Move the deadline ``seconds`` later; the waiting timeline step re-arms."""
        self.deadline_seconds += seconds

    def progress(self, progress: Progress) -> None:
        """Record a progress signal (ignored once the child has ended)."""
        if self.ended_at is not None:
            return
        self.phase, self.tool = progress.phase, progress.tool
        self.iteration = max(self.iteration, progress.iteration)
        if progress.usage is not None:
            self.usage = progress.usage
        if progress.message:
            self.latest_message = trimmed(progress.message)

    def info(self, now: datetime) -> WorkstreamInfo:
        """Its line in the ``workstreams`` query (elapsed up to ``now`` or its end)."""
        elapsed = max(((self.ended_at or now) - self.started_at).total_seconds(), 0.0)
        outcome = self.outcome
        return WorkstreamInfo(
            launch_id=self.launch_id,
            workstream_id=self.launch_id,
            child_workflow_id=self.child_id,
            task=self.request.task,
            label=self.request.label,
            interactive=self.request.interactive,
            state=self.state,
            phase=self.phase,
            tool=self.tool,
            iteration=max(self.iteration, outcome.iterations if outcome else 0),
            latest_message=self.latest_message,
            started_at=self.started_at.isoformat(),
            deadline_seconds=self.deadline_seconds,
            elapsed_seconds=round(elapsed, 3),
            deadline_used_pct=round(100 * elapsed / self.deadline_seconds, 1),
            summary=outcome.summary if outcome else None,
            error=outcome.error if outcome else None,
            artifacts=list(self.merged),
            usage=outcome.usage if outcome and outcome.usage else self.usage,
        )

    def _has_ended(self) -> bool:
        return self.ended_at is not None or (self.adopted and self.reported is not None)
