"""``Conversation``: the runs of one conversation, one at a time, in order.

Why a workflow (and not a lock in Redis or MongoDB): "which run is going" must be
decided once whichever gateway process asks, and "start the next one when this
one ends" must happen however the run ends — completed, failed, cancelled,
terminated from the Temporal UI, timed out — and survive any process dying in
between. One workflow per conversation that starts each run as a child
``GraphRun`` and awaits it gets both from Temporal: updates are applied one at a
time (the decision is atomic), a child's close is always delivered to its parent,
and the queue is in the workflow's durable state (docs/conversations.md).

Runs are children with ``ParentClosePolicy.ABANDON``: they are ordinary runs in
every other respect (their own workflow ids, streams, cancel and terminate routes).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
    TimeoutError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.conversations import (
        CANCEL_QUEUED_RUN_UPDATE,
        CONVERSATION_RUN_STARTED,
        CONVERSATION_RUNS_KEPT,
        CONVERSATION_RUNS_QUERY,
        CONVERSATION_WORKFLOW,
        INTERRUPT_ACTIVITY_PATCH,
        INTERRUPT_RUN,
        ROLL_BACK_RUN,
        SUBMIT_RUN_UPDATE,
        CancelQueuedRun,
        ConversationInput,
        ConversationRun,
        ConversationRuns,
        ConversationRunState,
        IfBusy,
        InterruptRun,
        QueuedRunCanceled,
        RollBackRun,
        RunStartedInConversation,
        SubmitAck,
        SubmitRun,
    )
    from spindle.shared.contracts.errors import ConversationBusy, Forbidden, to_application_error
    from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW
    from spindle.worker.contracts import policies

# The keys the gateway starts runs with (registered on the server: spindle.dev.embedded).
_TENANT_KEY = SearchAttributeKey.for_keyword("SpindleTenant")
_GRAPH_KEY = SearchAttributeKey.for_keyword("SpindleGraph")
_ROLLBACK_START_TO_CLOSE = timedelta(seconds=30)


def _closed_state(error: ChildWorkflowError) -> ConversationRunState:
    cause = error.cause
    if isinstance(cause, CancelledError):
        return ConversationRunState.CANCELED
    if isinstance(cause, TerminatedError):
        return ConversationRunState.TERMINATED
    if isinstance(cause, TimeoutError):
        return ConversationRunState.TIMED_OUT
    return ConversationRunState.FAILED


@workflow.defn(name=CONVERSATION_WORKFLOW)
class Conversation:
    """Starts the conversation's runs one after the other (see the module doc)."""

    @workflow.init
    def __init__(self, start: ConversationInput) -> None:
        self._start = start
        self._runs: list[ConversationRun] = list(start.runs)
        self._pending: dict[str, SubmitRun] = {s.workflow_id: s for s in start.pending}
        self._queue: list[str] = [s.workflow_id for s in start.pending]
        self._current: str | None = None
        self._child: workflow.ChildWorkflowHandle[object, object] | None = None

    @workflow.run
    async def run(self, start: ConversationInput) -> None:
        """Run queued runs in order, forever (continuing as new when history grows)."""
        while True:
            await workflow.wait_condition(lambda: bool(self._queue))
            await self._run_next()
            if workflow.info().is_continue_as_new_suggested():
                # A submit that found the conversation idle waits for its run to
                # start: start it first (continue as new after a later run).
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() or bool(self._queue)
                )
                if not self._queue:
                    workflow.continue_as_new(self._carry())

    def _carry(self) -> ConversationInput:
        return ConversationInput(
            tenant_id=self._start.tenant_id,
            conversation_id=self._start.conversation_id,
            task_queue=self._start.task_queue,
            runs=self._runs[-CONVERSATION_RUNS_KEPT:],
            pending=[self._pending[w] for w in self._queue],
        )

    def _entry(self, workflow_id: str) -> ConversationRun | None:
        return next((r for r in self._runs if r.workflow_id == workflow_id), None)

    async def _run_next(self) -> None:
        workflow_id = self._queue.pop(0)
        submit = self._pending.pop(workflow_id)
        entry = self._entry(workflow_id)
        assert entry is not None
        run_input = submit.run_input
        try:
            child = await workflow.start_child_workflow(
                GRAPH_RUN_WORKFLOW,
                run_input,
                id=workflow_id,
                task_queue=self._start.task_queue,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                memo={
                    "graph": run_input.graph.name,
                    "tenant": run_input.tenant_id,
                    "user": run_input.user_id,
                    "conversation": self._start.conversation_id,
                },
                search_attributes=TypedSearchAttributes(
                    [
                        SearchAttributePair(_TENANT_KEY, run_input.tenant_id),
                        SearchAttributePair(_GRAPH_KEY, run_input.graph.name),
                    ]
                ),
                static_summary=f"graph {run_input.graph.name}",
            )
        except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
            workflow.logger.warning(
                "run %s of the conversation did not start: %s", workflow_id, exc
            )
            entry.state = ConversationRunState.FAILED
            entry.ended_at = workflow.now()
            return
        self._current, self._child = workflow_id, child
        entry.state = ConversationRunState.RUNNING
        entry.run_id = child.first_execution_run_id
        entry.started_at = workflow.now()
        await self._record_start(entry)
        try:
            await child
            state = ConversationRunState.COMPLETED
        except ChildWorkflowError as exc:
            state = _closed_state(exc)
        finally:
            self._current, self._child = None, None
        entry.ended_at = workflow.now()
        if not entry.in_history:
            entry.state = ConversationRunState.ROLLED_BACK
        elif entry.ended_by is not None and state == ConversationRunState.CANCELED:
            entry.state = ConversationRunState.INTERRUPTED
        else:
            entry.state = state

    async def _record_start(self, entry: ConversationRun) -> None:
        """The run's document and stream metadata get its run id (best effort: the
        run itself writes its document as it goes)."""
        try:
            await workflow.execute_activity(
                CONVERSATION_RUN_STARTED,
                RunStartedInConversation(
                    workflow_id=entry.workflow_id,
                    run_id=entry.run_id or "",
                    conversation_id=self._start.conversation_id,
                ),
                start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
                retry_policy=policies.NOTICE_RETRY,
            )
        except ActivityError as exc:
            workflow.logger.warning("run %s: start not recorded: %s", entry.workflow_id, exc)

    # -- the update and the query ----------------------------------------------

    def _busy_with(self) -> str | None:
        """The run going, else the next queued one; None when the conversation is idle."""
        return self._current or (self._queue[0] if self._queue else None)

    @workflow.update(name=SUBMIT_RUN_UPDATE)
    async def submit_run(self, submit: SubmitRun) -> SubmitAck:
        """Take a run under its busy-run policy; answers once it started, or is queued."""
        known = self._entry(submit.workflow_id)
        if known is not None:  # a retried submit (same Idempotency-Key)
            return self._ack(known, None)
        busy_with = self._busy_with()
        entry = ConversationRun(
            workflow_id=submit.workflow_id,
            graph=submit.run_input.graph.name,
            if_busy=submit.if_busy,
            submitted_at=workflow.now(),
            user_id=submit.run_input.user_id,
        )
        self._runs = [*self._runs, entry][-CONVERSATION_RUNS_KEPT:]
        self._pending[submit.workflow_id] = submit
        if busy_with is None or submit.if_busy == IfBusy.ENQUEUE:
            self._queue.append(submit.workflow_id)
        else:
            # Interrupt / rollback: next in line, after earlier ones that jumped the queue.
            ahead = 0
            while ahead < len(self._queue) and self._pending[self._queue[ahead]].if_busy in (
                IfBusy.INTERRUPT,
                IfBusy.ROLLBACK,
            ):
                ahead += 1
            self._queue.insert(ahead, submit.workflow_id)
            await self._end_current(submit)
        if busy_with is None:
            await workflow.wait_condition(lambda: entry.state != ConversationRunState.QUEUED)
        return self._ack(entry, busy_with)

    @submit_run.validator
    def _check_submit(self, submit: SubmitRun) -> None:
        if self._entry(submit.workflow_id) is None:
            self._check_may_end(submit)
        busy_with = self._busy_with()
        if (
            submit.if_busy == IfBusy.REJECT
            and busy_with is not None
            and self._entry(submit.workflow_id) is None
        ):
            raise to_application_error(
                ConversationBusy(
                    f"conversation '{self._start.conversation_id}' has run '{busy_with}' "
                    "going (if_busy: enqueue, interrupt or rollback to start anyway)",
                    context={
                        "conversation_id": self._start.conversation_id,
                        "running": busy_with,
                    },
                )
            )

    def _check_may_end(self, submit: SubmitRun) -> None:
        """Interrupt and rollback end the running run: only its owner or a run-control
        role may (the rule of ``POST /runs/{id}/cancel``, docs/operations/threat-model.md).
        Refused in the validator, so nothing is recorded and nothing starts."""
        if submit.if_busy not in (IfBusy.INTERRUPT, IfBusy.ROLLBACK) or self._current is None:
            return
        entry = self._entry(self._current)
        if entry is None or entry.ended_by is not None or submit.run_control:
            return  # already being ended: this submit ends nothing
        if entry.user_id is None or entry.user_id == submit.run_input.user_id:
            return
        raise to_application_error(
            Forbidden(
                f"if_busy: {submit.if_busy.value} would end run '{entry.workflow_id}' of "
                f"conversation '{self._start.conversation_id}', which another user started: "
                "only its owner or a user with a run-control role may end it",
                context={
                    "conversation_id": self._start.conversation_id,
                    "running": entry.workflow_id,
                },
            )
        )

    async def _end_current(self, submit: SubmitRun) -> None:
        current, child = self._current, self._child
        if current is None or child is None:
            return
        entry = self._entry(current)
        assert entry is not None
        if entry.ended_by is not None:
            return  # already being ended by an earlier interrupt or rollback
        entry.ended_by = submit.workflow_id
        if submit.if_busy == IfBusy.INTERRUPT:
            # The run's own cancel path: it stops gracefully and posts TERMINATED,
            # naming the run that interrupted it (the activity notes it first).
            if workflow.patched(INTERRUPT_ACTIVITY_PATCH):
                await workflow.execute_activity(
                    INTERRUPT_RUN,
                    InterruptRun(workflow_id=current, by=submit.workflow_id),
                    start_to_close_timeout=_ROLLBACK_START_TO_CLOSE,
                    retry_policy=policies.LIFECYCLE_RETRY,
                )
            else:
                child.cancel()
            return
        entry.in_history = False
        await workflow.execute_activity(
            ROLL_BACK_RUN,
            RollBackRun(workflow_id=current, by=submit.workflow_id),
            start_to_close_timeout=_ROLLBACK_START_TO_CLOSE,
            retry_policy=policies.LIFECYCLE_RETRY,
        )

    def _ack(self, entry: ConversationRun, busy_with: str | None) -> SubmitAck:
        position = self._queue.index(entry.workflow_id) if entry.workflow_id in self._queue else 0
        return SubmitAck(
            workflow_id=entry.workflow_id,
            run_id=entry.run_id,
            state=entry.state,
            position=position,
            current=busy_with,
        )

    @workflow.update(name=CANCEL_QUEUED_RUN_UPDATE)
    def cancel_queued_run(self, cancel: CancelQueuedRun) -> QueuedRunCanceled:
        """Take a queued run out of the queue: it never starts, the runs after it move
        up. A run that has started is left alone (its state says so: cancel it as a run)."""
        entry = self._entry(cancel.workflow_id)
        if entry is None:
            return QueuedRunCanceled(workflow_id=cancel.workflow_id)
        if cancel.workflow_id in self._queue:
            self._queue.remove(cancel.workflow_id)
            self._pending.pop(cancel.workflow_id, None)
            entry.state = ConversationRunState.CANCELED
            entry.ended_at = workflow.now()
            entry.canceled_by = cancel.by
        return QueuedRunCanceled(workflow_id=cancel.workflow_id, state=entry.state)

    @workflow.query(name=CONVERSATION_RUNS_QUERY)
    def conversation_runs(self) -> ConversationRuns:
        """Every run of the conversation (the newest ``CONVERSATION_RUNS_KEPT``), oldest first."""
        return ConversationRuns(
            conversation_id=self._start.conversation_id,
            current=self._current,
            runs=self._runs,
            # Runs that ran: neither queued nor cancelled (or failed) before they started.
            history=[
                r.workflow_id for r in self._runs if r.in_history and r.started_at is not None
            ],
        )
