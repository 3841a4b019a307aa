"""A child workstream's steering book and bounded conversation (pure, deterministic).

Steers queue as they arrive (signal ``Steer``) and are applied at the next step
boundary: text commands become standing instructions, each injected once into
the conversation as a user message; ``pause_requested`` / ``resume_requested``
toggle the pause. Every steer ends either applied or rejected (with a reason),
and the workflow acknowledges each with one message on the stream.

The parent's budget holds the child with steers of origin ``budget``
(docs/graphs/budgets.md, "Workstreams at a cap"): they toggle a hold of their
own, ``budget_held``, which a user's ``resume_requested`` does not lift; the
child takes no step while either holds it (``holding``).
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.workstreams import SteerCommand, SteerDirective, WorkstreamCarry
    from spindle.worker.contracts import ChatMessage, RunNotice, RunRef

MAX_APPLIED_STEERS = 100
#: Why a user's resume leaves the child waiting (docs/graphs/budgets.md).
_BUDGET_HELD = "held by the run's budget: it resumes when the run's budget is raised"
_TEXT_PREFIX = {
    SteerCommand.ADD_INSTRUCTION: "Additional instruction",
    SteerCommand.SET_PRIORITY: "New priority",
    SteerCommand.ADD_CONSTRAINT: "Constraint",
}


@dataclass(frozen=True)
class SteerOutcome:
    """How one steer was handled, at which step (1-based count of LLM turns +
    tool calls: the first step that runs with it)."""

    directive: SteerDirective
    applied: bool
    step: int
    reason: str | None = None
    message: ChatMessage | None = None

    def notice(self, run: RunRef) -> RunNotice:
        """The acknowledgement message for the stream (SYSTEM, with ``w``)."""
        d = self.directive
        status = "applied" if self.applied else "rejected"
        text = f"steer {d.steer_id} ({d.command.value}) {status} at step {self.step}"
        if self.reason:
            text += f": {self.reason}"
        return RunNotice(
            run=run,
            type=int(AgentMessageType.SYSTEM),
            text=text,
            details={
                "steer_id": d.steer_id,
                "command": d.command.value,
                "origin": d.origin,
                "status": status,
                "applied_at_step": self.step,
                "reason": self.reason,
            },
        )


class SteeringBook:
    """Queued steers, standing instructions, applied ids and the pause flag."""

    def __init__(self, carry: WorkstreamCarry | None = None) -> None:
        carry = carry or WorkstreamCarry()
        self.queue: list[SteerDirective] = list(carry.pending_steers)
        self.instructions: list[str] = list(carry.instructions)
        self.applied: list[str] = list(carry.applied_steers)
        self.paused = carry.paused
        self.budget_held = carry.budget_held

    @property
    def holding(self) -> bool:
        """No step may start: paused by a steer, or held by the parent's budget."""
        return self.paused or self.budget_held

    def apply_queued(self, step: int) -> list[SteerOutcome]:
        """Apply every queued steer now (in arrival order) and empty the queue."""
        queued, self.queue = self.queue, []
        return [self._apply(d, step) for d in queued]

    def reject_queued(self, step: int, reason: str) -> list[SteerOutcome]:
        """Reject every queued steer (the workstream is ending)."""
        queued, self.queue = self.queue, []
        return [SteerOutcome(d, applied=False, step=step, reason=reason) for d in queued]

    def _apply(self, directive: SteerDirective, step: int) -> SteerOutcome:
        command = directive.command
        if directive.origin == "budget":
            return self._budget_hold(directive, step)
        if command == SteerCommand.PAUSE_REQUESTED:
            if self.paused:
                return SteerOutcome(directive, False, step, "already paused")
            self.paused = True
            return self._applied(directive, step)
        if command == SteerCommand.RESUME_REQUESTED:
            if not self.paused:
                reason = _BUDGET_HELD if self.budget_held else "not paused"
                return SteerOutcome(directive, False, step, reason)
            self.paused = False
            if self.budget_held:
                return self._applied(directive, step, reason=_BUDGET_HELD)
            return self._applied(directive, step)
        text = (directive.text or "").strip()
        if not text:
            return SteerOutcome(directive, False, step, f"'{command.value}' needs a text")
        content = f"{_TEXT_PREFIX[command]} (steer {directive.steer_id}): {text}"
        self.instructions.append(content)
        return self._applied(directive, step, ChatMessage(role="user", content=content))

    def _budget_hold(self, directive: SteerDirective, step: int) -> SteerOutcome:
        """The parent's budget holds (pause) or releases (resume) the child."""
        hold = directive.command == SteerCommand.PAUSE_REQUESTED
        if directive.command not in (SteerCommand.PAUSE_REQUESTED, SteerCommand.RESUME_REQUESTED):
            return SteerOutcome(directive, False, step, "a budget steer pauses or resumes")
        if self.budget_held == hold:
            return SteerOutcome(directive, False, step, "already so")
        self.budget_held = hold
        return self._applied(directive, step, reason=directive.text)

    def _applied(
        self,
        directive: SteerDirective,
        step: int,
        message: ChatMessage | None = None,
        reason: str | None = None,
    ) -> SteerOutcome:
        self.applied = [*self.applied, directive.steer_id][-MAX_APPLIED_STEERS:]
        return SteerOutcome(directive, True, step, reason=reason, message=message)
