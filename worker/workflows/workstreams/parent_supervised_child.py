"""One supervised workstream, as its parent sees it: start, deadline, stop, end.

``SupervisedChild.run`` is the supervisor task of one child (see
``spindle.worker.workflows.workstreams.parent_supervisor``):

1. start the child workflow ``Workstream`` (the parent's task queue) without
   waiting for its end. ``parent_close_policy`` is ABANDON (REQUEST_CANCEL in
   runs recorded before ``WORKSTREAMS_CARRIED_PATCH``), so the child outlives a
   parent generation that continues as new; the parent's code stops its
   children when it is cancelled or fails (``WorkstreamSupervisor.close``);
2. a non-interactive child gets the deadline timeline: WARNING at 75 % and
   90 % of its deadline, a wrap-up steer at 80 %, at 100 % state ``canceling``
   and ``Stop(timeout)``; an interactive one ends only when stopped;
3. a stopped child that has not ended ``GRACE_SECONDS`` later is cancelled
   (forced);
4. when it ends: the outcome (the child's ``WorkstreamOutcome``, or how its
   workflow ended), its artifacts merged (``merge_child_artifacts``), and a
   SYSTEM message on the parent's main stream with the result summary or the
   timeout notice and the partial result.

A parent generation that continues as new hands a running child over
(``carried``); the next generation ``adopt``s it: no handle, signals and cancel
through an external handle by the child's workflow id, its end from the
child's ``WorkstreamEnded`` signal (``report``), the deadline timeline going on
from the steps already taken.

Timers are durable (``workflow.wait_condition`` with a timeout), so the
time-skipping test server skips them. Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    TerminatedError,
)
from temporalio.exceptions import TimeoutError as WorkflowTimeoutError
from temporalio.workflow import ChildWorkflowHandle, ExternalWorkflowHandle, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.workstreams import (
        CHILD_MESSAGE_SIGNAL,
        CHILD_STEER_SIGNAL,
        CHILD_STOP_SIGNAL,
        GRACE_SECONDS,
        WARN_AT,
        WORKSTREAM_WORKFLOW,
        WORKSTREAMS_CARRIED_PATCH,
        WRAP_UP_AT,
        WRAP_UP_TEXT,
        ChildMessage,
        ChildStop,
        SteerCommand,
        SteerDirective,
        WorkstreamInput,
        WorkstreamOutcome,
        WorkstreamPhase,
        WorkstreamState,
    )
    from spindle.worker.contracts import (
        MERGE_CHILD_ARTIFACTS,
        POST_MESSAGE,
        ArtifactMerge,
        MergedArtifacts,
        RunNotice,
        policies,
    )
    from spindle.worker.workflows.workstreams.parent_child_record import (
        ChildRecord,
        StopReason,
        trimmed,
    )

_STOPPED_BY = {
    "terminate": "terminated",
    "parent_finished": "stopped because the run ended",
    "parent_canceled": "stopped because the run was cancelled",
}


#: The deadline timeline of a non-interactive child: (fraction of the deadline, step).
_DEADLINE_STEPS = sorted(
    [(WARN_AT[0], "warn"), (WRAP_UP_AT, "wrap_up"), (WARN_AT[1], "warn"), (1.0, "stop")]
)


@dataclass
class SupervisedChild(ChildRecord):
    """One launched child and its supervision task (see the module docstring); what
    the parent knows of it is its ``ChildRecord``."""

    _timers: list[asyncio.Task[None]] = field(default_factory=list)

    # -- what others call -------------------------------------------------------------

    async def run(self) -> None:
        """The supervisor task: start, supervise, settle. Never cancel it: the child
        handle it awaits would be cancelled with it."""
        # ABANDON: a continue-as-new closes this parent run, and the child must go on;
        # the parent's cancel and failure still stop it (``WorkstreamSupervisor.close``).
        self.abandon = workflow.patched(WORKSTREAMS_CARRIED_PATCH)
        policy = ParentClosePolicy.ABANDON if self.abandon else ParentClosePolicy.REQUEST_CANCEL
        try:
            self.handle = await workflow.start_child_workflow(
                WORKSTREAM_WORKFLOW,
                WorkstreamInput(
                    launch=self.request,
                    launch_id=self.launch_id,
                    parent_workflow_id=self.parent.workflow_id,
                    stream_id=self.parent.stream_id,
                    tenant_id=self.parent.tenant_id,
                    user_id=self.user_id,
                    graph_name=self.parent.graph_name,
                    replay=self.parent.replay,  # a recorded fork's child replays too
                ),
                id=self.child_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=policy,
                result_type=WorkstreamOutcome,
                static_summary=f"{self.launch_id}: {self.request.label or self.request.task}"[:200],
            )
        except FailureError as exc:
            workflow.logger.warning("workstream %s did not start: %s", self.launch_id, exc)
            failed = WorkstreamOutcome(
                launch_id=self.launch_id, state=WorkstreamState.FAILED, error=str(exc)
            )
            self._ended(failed)
            await self._announce()
            self.settled = True
            return
        if self.stop_reason is not None:  # stopped while it was starting
            await self._send_stop()
        await self._supervise(self._child_end())

    async def resume(self) -> None:
        """The supervisor task of an adopted child: as ``run`` after the start, the end
        coming from its ``WorkstreamEnded`` signal."""
        if self.settled:
            return
        await self._supervise(self._reported_end())

    async def _supervise(self, end: Awaitable[WorkstreamOutcome]) -> None:
        if not self.request.interactive:
            self._timers.append(asyncio.create_task(self._deadline()))
        self._ended(await end)
        while self._timers:  # each sees the end and returns
            await self._timers.pop(0)
        if self.request.merge_child_artifacts:
            await self._merge()
        await self._announce()
        self.settled = True

    async def stop(self, reason: StopReason) -> None:
        """Ask it to stop gracefully (``canceling``); forced after ``GRACE_SECONDS``.
        A child already stopping or ended is left as it is."""
        if self.stop_reason is not None or self.ended_at is not None or self.state.finished:
            return
        self.stop_reason, self.state = reason, WorkstreamState.CANCELING
        if self.started:
            await self._send_stop()

    def _target(self) -> ChildWorkflowHandle[Any, WorkstreamOutcome] | ExternalWorkflowHandle[Any]:
        if self.handle is not None:
            return self.handle
        return workflow.get_external_workflow_handle(self.child_id)

    async def signal(self, name: str, arg: BaseModel) -> bool:
        """Signal the child; False if it could not be delivered (it has ended)."""
        await workflow.wait_condition(lambda: self.started or self.settled)
        if not self.started or self.ended_at is not None:
            return False
        try:
            await self._target().signal(name, arg)
        except FailureError as exc:
            workflow.logger.info("signal %s to %s not delivered: %s", name, self.launch_id, exc)
            return False
        return True

    def take_turn(self) -> int:
        """A place in the order of messages handed over: taken when the message is
        accepted, so the run sees a delivery pending (``deliveries_done``) at once,
        before the delivery's task has run (a generation must not hand over then)."""
        turn = self._handed
        self._handed += 1
        return turn

    async def hand_over(self, message: ChildMessage, turn: int) -> None:
        """Deliver a message already acknowledged to the caller, after those before it
        (``turn`` from ``take_turn``).

        A child that has ended meanwhile cannot take it: the message is then
        refused on the stream, as the child refuses the ones still queued when it
        ends, so none is lost silently.
        """
        await workflow.wait_condition(lambda: self._delivered == turn)
        try:
            if not await self.signal(CHILD_MESSAGE_SIGNAL, message):
                reason = "the workstream has ended"
                await self._post(
                    AgentMessageType.SYSTEM,
                    f"message {message.message_id} rejected: {reason}",
                    {
                        "message_id": message.message_id,
                        "status": "rejected",
                        "reason": reason,
                        "launch_id": self.launch_id,
                    },
                    key=f"reject.{message.message_id}",
                    retry=policies.NOTICE_RETRY,
                    as_child=True,
                )
        finally:
            self._delivered += 1

    # -- deadline and stop -----------------------------------------------------------

    async def _deadline(self) -> None:
        for fraction, step in _DEADLINE_STEPS[self.steps_done :]:
            if await self._reaches(fraction):
                return
            if self.stop_reason is not None:  # terminated, or the run is ending
                return
            self.busy = True
            try:
                await self._deadline_step(fraction, step)
            finally:
                self.busy = False
                self.steps_done += 1

    async def _deadline_step(self, fraction: float, step: str) -> None:
        seconds = self.deadline_seconds
        if step == "warn":
            pct = round(fraction * 100)
            await self._post(
                AgentMessageType.WARNING,
                f"Workstream {self.launch_id} has used {pct}% of its {seconds} s deadline.",
                {"launch_id": self.launch_id, "pct": pct},
                key=f"warn{pct}",
                retry=policies.NOTICE_RETRY,
            )
        elif step == "wrap_up":
            wrap_up = SteerDirective(
                steer_id=self.next_steer_id(),
                command=SteerCommand.ADD_INSTRUCTION,
                text=WRAP_UP_TEXT,
                origin="deadline",
            )
            await self.signal(CHILD_STEER_SIGNAL, wrap_up)
        else:
            await self.stop("timeout")

    async def _reaches(self, fraction: float) -> bool:
        """Wait until ``fraction`` of the deadline (re-armed when it is extended) or the
        child's end; True if it ended."""
        while True:
            seconds = self.deadline_seconds
            when = self.started_at + timedelta(seconds=seconds * fraction)
            ended = await self._ends_by(when, self._deadline_moved_from(seconds))
            if ended or self.deadline_seconds == seconds:
                return ended

    def _deadline_moved_from(self, seconds: int) -> Callable[[], bool]:
        return lambda: self.deadline_seconds != seconds

    async def _ends_by(self, when: datetime, changed: Callable[[], bool] | None = None) -> bool:
        """Wait (a durable timer) until ``when``, the child's end or ``changed()``; True if
        it ended."""
        remaining = (when - workflow.now()).total_seconds()
        if remaining > 0:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self._has_ended() or (changed is not None and changed()),
                    timeout=remaining,
                )
        return self._has_ended()

    async def _send_stop(self) -> None:
        assert self.stop_reason is not None
        self._timers.append(asyncio.create_task(self._grace()))
        await self.signal(CHILD_STOP_SIGNAL, ChildStop(reason=self.stop_reason))

    async def _grace(self) -> None:
        if await self._ends_by(workflow.now() + timedelta(seconds=GRACE_SECONDS)):
            return
        workflow.logger.info("workstream %s did not stop within its grace period", self.launch_id)
        self.forced = True
        if self.handle is not None:
            self.handle.cancel()
            return
        # Adopted: a cancelled child still reports its end; one that cannot (terminated
        # meanwhile) is counted cancelled after a second grace period.
        try:
            await workflow.get_external_workflow_handle(self.child_id).cancel()
        except FailureError as exc:
            workflow.logger.info("cannot cancel %s: %s", self.launch_id, exc)
        if not await self._ends_by(workflow.now() + timedelta(seconds=GRACE_SECONDS)):
            self.report(
                WorkstreamOutcome(
                    launch_id=self.launch_id,
                    state=WorkstreamState.CANCELED,
                    summary=self.latest_message,
                    error="the child workflow did not report its end after cancellation",
                    iterations=self.iteration,
                )
            )

    # -- the end ------------------------------------------------------------------------

    async def _child_end(self) -> WorkstreamOutcome:
        assert self.handle is not None
        try:
            returned = await self.handle
        except ChildWorkflowError as err:
            return self._failure_outcome(err)
        return self._settled_outcome(returned)

    async def _reported_end(self) -> WorkstreamOutcome:
        await workflow.wait_condition(lambda: self.reported is not None)
        assert self.reported is not None
        return self._settled_outcome(self.reported)

    def _settled_outcome(self, returned: WorkstreamOutcome) -> WorkstreamOutcome:
        # The child's word counts (a stopped task that reached its answer anyway
        # is completed), except that a stop for the deadline is a timeout.
        state = returned.state
        if not state.finished:
            state = WorkstreamState.COMPLETED if self.stop_reason is None else self._stopped_state()
        elif state is WorkstreamState.CANCELED and self.stop_reason == "timeout":
            state = WorkstreamState.TIMEOUT
        summary = returned.summary if returned.summary is not None else self.latest_message
        return returned.model_copy(
            update={"launch_id": self.launch_id, "state": state, "summary": trimmed(summary)}
        )

    def _stopped_state(self) -> WorkstreamState:
        if self.stop_reason == "timeout":
            return WorkstreamState.TIMEOUT
        return WorkstreamState.CANCELED

    def _failure_outcome(self, err: ChildWorkflowError) -> WorkstreamOutcome:
        cause = err.cause
        error: str | None = None
        if isinstance(cause, CancelledError):
            state = WorkstreamState.CANCELED
        elif isinstance(cause, TerminatedError):
            state, error = WorkstreamState.CANCELED, "the child workflow was terminated"
        elif isinstance(cause, WorkflowTimeoutError):
            state, error = WorkstreamState.TIMEOUT, "the child workflow timed out"
        else:
            state = WorkstreamState.FAILED
            error = cause.message if isinstance(cause, FailureError) else str(cause or err)
        if self.stop_reason is not None and state is not WorkstreamState.FAILED:
            state = self._stopped_state()
        return WorkstreamOutcome(
            launch_id=self.launch_id,
            state=state,
            summary=self.latest_message,
            error=error,
            iterations=self.iteration,
        )

    def _ended(self, outcome: WorkstreamOutcome) -> None:
        self.ended_at = workflow.now()
        self.outcome = outcome
        self.state = outcome.state
        self.phase, self.tool = WorkstreamPhase.DONE, None

    async def _merge(self) -> None:
        try:
            merged: MergedArtifacts = await workflow.execute_activity(
                MERGE_CHILD_ARTIFACTS,
                ArtifactMerge(
                    tenant_id=self.parent.tenant_id,
                    parent_workflow_id=self.parent.workflow_id,
                    child_workflow_id=self.child_id,
                    launch_id=self.launch_id,
                ),
                result_type=MergedArtifacts,
                activity_id=f"ws.{self.launch_id}.merge",
                start_to_close_timeout=policies.ARTIFACT_MERGE_START_TO_CLOSE,
                retry_policy=policies.ARTIFACT_RETRY,
            )
        except ActivityError as exc:
            workflow.logger.warning("artifacts of %s not merged: %s", self.launch_id, exc)
            return
        self.merged = merged.names

    async def _announce(self) -> None:
        outcome = self.outcome
        assert outcome is not None
        await self._post(
            AgentMessageType.SYSTEM,
            end_text(self.launch_id, outcome, self.deadline_seconds, self.stop_reason),
            {
                "launch_id": self.launch_id,
                "child_workflow_id": self.child_id,
                "state": outcome.state.value,
                "summary": outcome.summary,
                "error": outcome.error,
                "iterations": outcome.iterations,
                "artifacts": self.merged,
                "forced": self.forced,
            },
            key="end",
            retry=policies.LIFECYCLE_RETRY,
        )

    async def _post(
        self,
        kind: AgentMessageType,
        text: str,
        details: dict[str, Any],
        *,
        key: str,
        retry: RetryPolicy,
        as_child: bool = False,
    ) -> None:
        run = self.parent
        if as_child:  # with its ``w``: what the child would have said itself
            run = run.model_copy(update={"workstream_id": self.launch_id})
        try:
            await workflow.execute_activity(
                POST_MESSAGE,
                RunNotice(run=run, type=int(kind), text=text, details=details),
                activity_id=f"ws.{self.launch_id}.{key}",
                start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
                retry_policy=retry,
            )
        except ActivityError as exc:
            workflow.logger.warning("cannot post %s of %s: %s", key, self.launch_id, exc)


def end_text(
    launch_id: str, outcome: WorkstreamOutcome, deadline_seconds: int, stop: StopReason | None
) -> str:
    """The SYSTEM message the parent posts when a child has ended."""
    partial = outcome.summary or "none"
    if outcome.state is WorkstreamState.COMPLETED:
        return f"Workstream {launch_id} completed: {outcome.summary or '(no summary)'}"
    if outcome.state is WorkstreamState.TIMEOUT:
        return (
            f"Workstream {launch_id} timed out: it passed its {deadline_seconds} s deadline "
            f"and was cancelled. Partial result: {partial}"
        )
    if outcome.state is WorkstreamState.FAILED:
        return f"Workstream {launch_id} failed: {outcome.error or 'unknown error'}"
    why = _STOPPED_BY.get(stop or "", "cancelled")
    return f"Workstream {launch_id} was {why}. Partial result: {partial}"
