"""The workstream updates, signal and query of ``GraphRun`` (a mixin).

Each update's validator refuses bad requests before anything is recorded in
the run's history, with an ``ApplicationError`` whose type the gateway maps to
an HTTP status (``spindle.shared.contracts.workstreams``): ``UnknownWorkstream`` (404),
``WorkstreamFinished`` / ``WorkstreamNotInteractive`` / ``RunFinishing`` /
``DeadlineRefused`` / ``BudgetRefused`` (409).
The work itself is ``WorkstreamSupervisor``'s.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import (
        EXTEND_WORKSTREAM_DEADLINE_UPDATE,
        DeadlineAck,
        ExtendWorkstreamDeadline,
    )
    from spindle.shared.contracts.workstreams import (
        LAUNCH_WORKSTREAM_UPDATE,
        MESSAGE_WORKSTREAM_UPDATE,
        STEER_WORKSTREAM_UPDATE,
        TERMINATE_WORKSTREAM_UPDATE,
        WORKSTREAM_ENDED_SIGNAL,
        WORKSTREAM_PROGRESS_SIGNAL,
        WORKSTREAMS_QUERY,
        LaunchAck,
        LaunchRequest,
        MessageWorkstream,
        Progress,
        SteerAck,
        SteerWorkstream,
        TerminateAck,
        TerminateWorkstream,
        WorkstreamList,
        WorkstreamMessageAck,
        WorkstreamOutcome,
    )
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor


class WorkstreamHandlers:
    """Mixed into a workflow class that sets ``self._workstreams`` in its init."""

    _workstreams: WorkstreamSupervisor

    @workflow.update(name=LAUNCH_WORKSTREAM_UPDATE)
    async def launch_workstream(self, request: LaunchRequest) -> LaunchAck:
        """Launch a child workstream; answers once it has started, not ended."""
        return await self._workstreams.launch(request)

    @launch_workstream.validator
    def _validate_launch(self, request: LaunchRequest) -> None:
        self._workstreams.check_launch()
        # Refused, not left waiting, while the run's budget holds it (budgets.md).
        self._workstreams.check_not_held()
        self._workstreams.check_budget(request)

    @workflow.update(name=STEER_WORKSTREAM_UPDATE)
    async def steer_workstream(self, request: SteerWorkstream) -> SteerAck:
        """Steer a running workstream (the child acknowledges it on the stream)."""
        return await self._workstreams.steer(request)

    @steer_workstream.validator
    def _validate_steer(self, request: SteerWorkstream) -> None:
        self._workstreams.check_running(request.launch_id)

    @workflow.update(name=MESSAGE_WORKSTREAM_UPDATE)
    async def message_workstream(self, request: MessageWorkstream) -> WorkstreamMessageAck:
        """Send a follow-up message to a running interactive workstream."""
        return await self._workstreams.message(request)

    @message_workstream.validator
    def _validate_message(self, request: MessageWorkstream) -> None:
        self._workstreams.check_interactive(request.launch_id)

    @workflow.update(name=TERMINATE_WORKSTREAM_UPDATE)
    async def terminate_workstream(self, request: TerminateWorkstream) -> TerminateAck:
        """Stop a workstream: graceful first, forced after the grace period."""
        return await self._workstreams.terminate(request)

    @terminate_workstream.validator
    def _validate_terminate(self, request: TerminateWorkstream) -> None:
        self._workstreams.check_terminate(request.launch_id)

    @workflow.update(name=EXTEND_WORKSTREAM_DEADLINE_UPDATE)
    def extend_workstream_deadline(self, request: ExtendWorkstreamDeadline) -> DeadlineAck:
        """Extend a workstream's deadline, within the run's own (docs/graphs/budgets.md)."""
        return self._workstreams.extend(request)

    @extend_workstream_deadline.validator
    def _validate_extend(self, request: ExtendWorkstreamDeadline) -> None:
        self._workstreams.check_extend(request)

    @workflow.signal(name=WORKSTREAM_PROGRESS_SIGNAL)
    def workstream_progress(self, progress: Progress) -> None:
        """A child reports what it is doing."""
        self._workstreams.progress(progress)

    @workflow.signal(name=WORKSTREAM_ENDED_SIGNAL)
    def workstream_ended(self, outcome: WorkstreamOutcome) -> None:
        """A child's own word on its end; how a generation that took children over
        from the one before learns it (docs/graphs/long-runs.md)."""
        self._workstreams.ended(outcome)

    @workflow.query(name=WORKSTREAMS_QUERY)
    def workstreams(self) -> WorkstreamList:
        """Every workstream of the run with state, phase and deadline use."""
        return self._workstreams.describe()
