"""``Workstream``: the child run a parent launched, watches and steers (docs/design.md §5).

The child runs its task through the agent loop (``spindle.worker.workflows.agent_loop``)
with itself as the loop's hooks: at every step boundary (before an LLM turn or a
tool call) it applies queued steers and acknowledges each on the stream, waits
while paused (by a steer, or by the parent's budget: steers of origin
``budget``, docs/graphs/budgets.md), and stops gracefully once asked. After
each step starts it signals its phase and iteration to the parent
(``WorkstreamProgress``; a parent that is gone is tolerated). Every message
it posts goes to the parent's stream with ``workstream_id = launch_id``.

How it ends (``WorkstreamOutcome.state``):

- non-interactive: after the task, ``finish_workstream`` stores ``out/result.md``
  and posts COMPLETE; ``completed`` (a final answer), ``failed`` (an activity
  failed for good, or no final answer within ``max_turns``);
- interactive: after the task it waits for ``Message`` signals, answering each
  with the conversation so far; it never completes on its own;
- ``Stop`` (graceful): the current step finishes, no further step starts, then it
  finishes as above with the best answer so far: ``timeout`` for reason
  ``timeout``, else ``canceled``. A task that reached its final answer anyway
  ends ``completed``;
- Temporal cancellation (forced): the running activity is cancelled and the
  workflow RETURNS an outcome at once (it completes, it does not end as
  cancelled): ``timeout`` if a ``Stop(timeout)`` came before, else ``canceled``,
  with the partial answer; nothing more is posted and no artifact is written
  (the parent reports it).

Budgets (docs/graphs/budgets.md): the child counts its own spend and reports it,
cumulative, with every progress signal and in its outcome; the parent counts it
against its own budget. A child launched with a ``budget`` of its own stops at
a cap like a graceful stop (no further step) and ends ``failed``, the error
naming the limit, with its best answer so far.

An idle interactive child continues-as-new (``WorkstreamCarry``) when Temporal
suggests it or after ``continue_as_new_after`` iterations in this generation.

Collaborators: ``ChildPosts`` (``child_posts``) posts its acks, notices and the
finish; ``child_progress`` sends its signals to the parent; ``SteeringBook``
(``child_steering``) holds its steers.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import BudgetCarry, BudgetLimit, BudgetLimits
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.workstreams import (
        CHILD_MESSAGE_SIGNAL,
        CHILD_STATE_QUERY,
        CHILD_STEER_SIGNAL,
        CHILD_STOP_SIGNAL,
        WORKSTREAM_WORKFLOW,
        ChildMessage,
        ChildState,
        ChildStop,
        Progress,
        SteerDirective,
        WorkstreamCarry,
        WorkstreamInput,
        WorkstreamOutcome,
        WorkstreamPhase,
        WorkstreamState,
    )
    from spindle.worker.contracts import ChatMessage, RunRef, ToolCall
    from spindle.worker.workflows.agent_loop import MEMORY_PATCH, AgentReply, converse
    from spindle.worker.workflows.budget_meter import BudgetMeter
    from spindle.worker.workflows.workstreams.child_agent import (
        bounded,
        child_execution,
        child_run_ref,
        memory_opening,
        opening,
        system_prompt,
    )
    from spindle.worker.workflows.workstreams.child_posts import ChildPosts
    from spindle.worker.workflows.workstreams.child_progress import (
        SIGNALS_FINISH_PATCH,
        ProgressSender,
        tell_parent_ended,
    )
    from spindle.worker.workflows.workstreams.child_steering import SteeringBook

SUMMARY_CHARS = 1000
PROGRESS_MESSAGE_CHARS = 200
# The "planning" progress of a reply to a message waits PLANNING_SETTLE for the
# reply to end (see child_progress): one progress signal per message, not two.
PROGRESS_SETTLE_PATCH = "workstream-progress-settle"
PLANNING_SETTLE = timedelta(seconds=1)


def _trim(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 1] + "…"


@workflow.defn(name=WORKSTREAM_WORKFLOW)
class Workstream:
    """One child workstream (see the module docstring)."""

    @workflow.init
    def __init__(self, data: WorkstreamInput) -> None:
        carry = data.carry
        self._input = data
        self._steering = SteeringBook(carry)
        self._conversation: list[ChatMessage] = [
            ChatMessage.model_validate(m) for m in (carry.conversation if carry else [])
        ]
        self._iteration = carry.iteration if carry else 0
        self._generation = carry.generation if carry else 0
        self._generation_start = self._iteration
        self._messages: list[ChildMessage] = list(carry.pending_messages) if carry else []
        self._last_answer = carry.last_answer if carry else None
        self._best: str | None = None  # of the exchange under way
        self._latest: str | None = None
        self._stop: ChildStop | None = None
        self._phase = WorkstreamPhase.BLOCKED if carry else WorkstreamPhase.PLANNING
        self._tool: str | None = None
        self._waiting = False
        self._inject: list[ChatMessage] = []
        self._exchanges = 0
        self._posts = ChildPosts(self._run_ref, data.launch_id)
        self._progress = ProgressSender(data.parent_workflow_id)
        spent = carry.usage if carry is not None else None
        self._meter = BudgetMeter(
            data.launch.budget,
            BudgetCarry(limits=data.launch.budget or BudgetLimits(), own=spent) if spent else None,
            self._budget_notice,
        )
        self._budget_hit: BudgetLimit | None = None
        self._settle: timedelta | None = None  # of the next progress (see _exchange)

    # -- signals and query -------------------------------------------------------

    @workflow.signal(name=CHILD_STEER_SIGNAL)
    def steer(self, directive: SteerDirective) -> None:
        """Queue a steer; it applies at the next step boundary."""
        self._steering.queue.append(directive)

    @workflow.signal(name=CHILD_MESSAGE_SIGNAL)
    def message(self, message: ChildMessage) -> None:
        """Queue a follow-up message (interactive workstreams)."""
        self._messages.append(message)

    @workflow.signal(name=CHILD_STOP_SIGNAL)
    def stop(self, stop: ChildStop) -> None:
        """Ask for a graceful stop; the first reason wins."""
        if self._stop is None:
            self._stop = stop

    @workflow.query(name=CHILD_STATE_QUERY)
    def state(self) -> ChildState:
        return ChildState(
            launch_id=self._input.launch_id,
            phase=self._phase,
            tool=self._tool,
            iteration=self._iteration,
            paused=self._steering.paused,
            instructions=list(self._steering.instructions),
            applied_steers=list(self._steering.applied),
            last_answer=self._last_answer,
            generation=self._generation,
            waiting_for_message=self._waiting,
            budget_held=self._steering.budget_held,
        )

    # -- run ---------------------------------------------------------------------

    @workflow.run
    async def run(self, data: WorkstreamInput) -> WorkstreamOutcome:
        """Run the task (and, interactive, the follow-ups); tell the parent how it ended."""
        try:
            outcome = await self._run_to_end()
        except FailureError as exc:
            await tell_parent_ended(
                self._input.parent_workflow_id,
                self._outcome(WorkstreamState.FAILED, self._best or self._last_answer, str(exc)),
            )
            raise
        await tell_parent_ended(self._input.parent_workflow_id, outcome)
        return outcome

    async def _run_to_end(self) -> WorkstreamOutcome:
        sender = asyncio.create_task(self._progress.run())
        try:
            return await self._lifecycle()
        except (asyncio.CancelledError, ActivityError) as exc:
            if not is_cancelled_exception(exc):
                raise
            # Forced: end now with what exists; the parent posts about it.
            if workflow.patched(SIGNALS_FINISH_PATCH):
                self._progress.stop()  # at its next wait, not inside a signal
            else:
                sender.cancel()
            timeout = self._stop is not None and self._stop.reason == "timeout"
            state = WorkstreamState.TIMEOUT if timeout else WorkstreamState.CANCELED
            self._phase, self._tool, self._waiting = WorkstreamPhase.DONE, None, False
            return self._outcome(state, self._best or self._last_answer)

    async def _lifecycle(self) -> WorkstreamOutcome:
        launch = self._input.launch
        if self._input.carry is None:
            self._conversation = opening(system_prompt(self._input), launch.task)
            reply = await self._exchange(None)
            if not launch.interactive:
                return await self._end_task(reply)
            if self._stop is None:
                await self._report_exchange_failure(reply)
        while self._stop is None and self._budget_hit is None:
            message = await self._next_message()
            if message is None:
                break
            await self._report_exchange_failure(await self._exchange(message.text))
        if self._budget_hit is not None:
            return await self._finish(
                WorkstreamState.FAILED, self._last_answer, self._budget_error()
            )
        return await self._finish(self._stopped_state(), self._last_answer)

    async def _exchange(self, text: str | None) -> AgentReply | ActivityError:
        """One run of the agent loop over the conversation (plus ``text``)."""
        if text is not None and workflow.patched(MEMORY_PATCH):
            # The conversation is the agent's memory, under its context policy: an
            # exchange sends only its own opening (docs/conversations.md, Memory).
            self._conversation = memory_opening(
                system_prompt(self._input),
                self._steering.instructions,
                [*self._conversation, ChatMessage(role="user", content=text)],
            )
        elif text is not None:
            self._conversation = bounded(
                [*self._conversation, ChatMessage(role="user", content=text)],
                self._steering.instructions,
            )
        self._exchanges += 1
        self._best = None
        self._waiting = False
        if text is not None and workflow.patched(PROGRESS_SETTLE_PATCH):
            self._settle = PLANNING_SETTLE
        execution = child_execution(
            self._input,
            self._run_ref(),
            visit=self._exchanges,
            prompt=text if text is not None else self._input.launch.task,
            started_at=workflow.now().isoformat(),
        )
        try:
            reply = await converse(
                execution,
                opening=self._conversation,
                hooks=self,
                id_prefix=f"g{self._generation}.m{self._exchanges}",
                meter=self._meter,
            )
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            workflow.logger.warning("workstream %s: %s", self._input.launch_id, exc)
            return exc
        # With a memory, the stored conversation holds it all: keep only what comes
        # between exchanges (idle steers), for the next exchange to send.
        self._conversation = [] if workflow.patched(MEMORY_PATCH) else reply.conversation
        answer = reply.answer or self._best
        if answer:
            self._last_answer = answer
        return reply

    async def _end_task(self, reply: AgentReply | ActivityError) -> WorkstreamOutcome:
        """The end of a non-interactive workstream after its task."""
        if isinstance(reply, ActivityError):
            error = str(reply.cause or reply)
            return await self._finish(WorkstreamState.FAILED, self._best, error)
        if reply.final:
            return await self._finish(WorkstreamState.COMPLETED, reply.answer)
        if self._budget_hit is not None:
            return await self._finish(
                WorkstreamState.FAILED, reply.answer or None, self._budget_error()
            )
        if reply.stopped or self._stop is not None:
            return await self._finish(self._stopped_state(), reply.answer or None)
        error = f"no final answer within max_turns ({self._input.launch.agent.max_turns})"
        return await self._finish(WorkstreamState.FAILED, reply.answer or None, error)

    async def _report_exchange_failure(self, reply: AgentReply | ActivityError) -> None:
        """Interactive: a failed exchange is reported, and the workstream goes on."""
        if isinstance(reply, ActivityError):
            text = f"workstream {self._input.launch_id}: {reply.cause or reply}"
            await self._posts.notice(AgentMessageType.ERROR, text)
        elif reply.exhausted:
            limit = self._input.launch.agent.max_turns
            text = f"workstream {self._input.launch_id}: no final answer within {limit} turns"
            await self._posts.notice(AgentMessageType.WARNING, text)

    async def _next_message(self) -> ChildMessage | None:
        """Interactive idle: apply steers, continue-as-new if due, wait for a
        message (None: stop)."""
        while True:
            await self._apply_steers(idle=True)
            if self._stop is not None:
                return None
            if self._messages and not self._steering.holding:
                message = self._messages.pop(0)
                await self._posts.acknowledge_message(message, self._iteration + 1)
                return message
            if self._continue_as_new_due():
                await self._continue_as_new()
                continue
            self._waiting = not self._steering.holding
            self._enter(WorkstreamPhase.BLOCKED)
            await workflow.wait_condition(
                lambda: (
                    bool(self._steering.queue)
                    or self._stop is not None
                    or (bool(self._messages) and not self._steering.holding)
                )
            )

    async def _finish(
        self, state: WorkstreamState, answer: str | None, error: str | None = None
    ) -> WorkstreamOutcome:
        self._waiting = False
        step = self._iteration + 1
        await self._posts.acknowledge(
            self._steering.reject_queued(step, "the workstream has ended")
        )
        pending, self._messages = self._messages, []
        for message in pending:
            await self._posts.acknowledge_message(message, step, "the workstream has ended")
        self._enter(WorkstreamPhase.DONE)
        finished = await self._posts.finish(
            state, answer, error, iterations=self._iteration, user_id=self._input.user_id
        )
        await self._progress.flushed()
        return self._outcome(state, answer, error, finished.artifacts)

    def _outcome(
        self,
        state: WorkstreamState,
        answer: str | None,
        error: str | None = None,
        artifacts: list[str] | None = None,
    ) -> WorkstreamOutcome:
        return WorkstreamOutcome(
            launch_id=self._input.launch_id,
            state=state,
            summary=_trim(answer, SUMMARY_CHARS),
            output=answer,
            error=error,
            iterations=self._iteration,
            artifacts=artifacts or [],
            usage=self._meter.own,
        )

    def _stopped_state(self) -> WorkstreamState:
        if self._stop is not None and self._stop.reason == "timeout":
            return WorkstreamState.TIMEOUT
        return WorkstreamState.CANCELED

    # -- continue-as-new ---------------------------------------------------------

    def _continue_as_new_due(self) -> bool:
        done = self._iteration - self._generation_start
        return (
            workflow.info().is_continue_as_new_suggested()
            or done >= self._input.continue_as_new_after
        )

    async def _continue_as_new(self) -> None:
        """Carry the state into a new run; returns only if a stop came meanwhile."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._progress.flushed()
        if self._stop is not None:
            return
        # Built after the last await: signals that came while draining are carried.
        carry = WorkstreamCarry(
            conversation=[
                m.model_dump(mode="json")
                for m in bounded(self._conversation, self._steering.instructions)
            ],
            iteration=self._iteration,
            applied_steers=list(self._steering.applied),
            instructions=list(self._steering.instructions),
            paused=self._steering.paused,
            budget_held=self._steering.budget_held,
            pending_messages=list(self._messages),
            pending_steers=list(self._steering.queue),
            last_answer=self._last_answer,
            generation=self._generation + 1,
            usage=self._meter.own,
        )
        workflow.continue_as_new(self._input.model_copy(update={"carry": carry}))

    # -- agent loop hooks (spindle.worker.workflows.agent_loop.AgentHooks) ---------------

    async def before_llm(self, turn: int) -> None:
        await self._boundary()
        self._check_budget()
        if not self.should_stop():
            self._iteration += 1
            phase = WorkstreamPhase.PLANNING if turn == 1 else WorkstreamPhase.SYNTHESIZING
            self._enter(phase)

    async def before_tool(self, turn: int, call: ToolCall) -> None:
        await self._boundary()
        self._check_budget()
        if not self.should_stop():
            self._iteration += 1
            self._enter(WorkstreamPhase.EXECUTING_TOOL, call.name)

    def after_llm(self, turn: int, message: ChatMessage) -> None:
        if message.content:
            self._best = message.content
            self._latest = _trim(message.content, PROGRESS_MESSAGE_CHARS)

    def extra_messages(self) -> list[ChatMessage]:
        messages, self._inject = self._inject, []
        return messages

    def should_stop(self) -> bool:
        return self._stop is not None or self._budget_hit is not None

    async def after_answer(self, reply: AgentReply) -> list[ChatMessage] | None:
        """An exchange ends at its answer: the next message starts the next one."""
        return None

    # -- budget --------------------------------------------------------------------

    def _check_budget(self) -> None:
        """At its own cap the child takes no further step (the loop sees should_stop)."""
        if self._budget_hit is None:
            self._budget_hit = self._meter.exhausted()

    def _budget_error(self) -> str:
        limit = self._budget_hit.value if self._budget_hit else "?"
        return f"budget exhausted: the workstream reached its {limit}"

    async def _budget_notice(self, text: str, details: dict[str, object]) -> None:
        # Never called: the child stops at a cap before the meter's gate would wait.
        await self._posts.notice(AgentMessageType.WARNING, text)

    # -- steering ----------------------------------------------------------------

    async def _boundary(self) -> None:
        """Apply queued steers; while paused or held by the parent's budget (and not
        stopping), wait."""
        while True:
            await self._apply_steers(idle=False)
            if not self._steering.holding or self._stop is not None:
                return
            self._enter(WorkstreamPhase.BLOCKED)
            await workflow.wait_condition(
                lambda: bool(self._steering.queue) or self._stop is not None
            )

    async def _apply_steers(self, *, idle: bool) -> None:
        outcomes = self._steering.apply_queued(self._iteration + 1)
        messages = [o.message for o in outcomes if o.message is not None]
        if idle:
            # Between exchanges: straight into the conversation (carried on).
            self._conversation.extend(messages)
        else:
            self._inject.extend(messages)
        await self._posts.acknowledge(outcomes)

    # -- progress to the parent --------------------------------------------------

    def _enter(self, phase: WorkstreamPhase, tool: str | None = None) -> None:
        """Record the phase and queue a progress signal for the parent."""
        self._phase, self._tool = phase, tool
        settle, self._settle = self._settle, None
        self._progress.send(
            Progress(
                launch_id=self._input.launch_id,
                phase=phase,
                tool=tool,
                iteration=self._iteration,
                message=self._latest,
                usage=self._meter.own,
            ),
            settle=settle,
        )

    def _run_ref(self) -> RunRef:
        info = workflow.info()
        return child_run_ref(self._input, info.workflow_id, info.run_id)
