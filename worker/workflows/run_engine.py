"""``RunEngine``: the logic of one durable run of a graph, behind ``GraphRun``.

``GraphRun`` (``graph_run.py``) is the Temporal surface: its init, run, updates,
query and signals, each a line that calls in here or in one of the engine's
collaborators. Temporal's sandbox imports a workflow's module afresh for every
run and applies ``@workflow.defn`` to its class again (docs/operations/scaling.md,
"Workflow sandbox"), so that module stays small; this one is passed through and
imported once per worker.

The engine dispatches: the scheduler (``scheduler``) decides what runs, and each
node runs the way its type's spec says (``NodeTypeSpec.runs``, in ``NodeRunners``,
``node_runners``): ``execute_node`` for tool/router/output/custom nodes
(``node_activity``), an LLM loop for ``agent`` nodes (``agent_loop``), batches
for ``map`` nodes (``map_batches``), a child launch for ``workstream`` nodes.
Each concern is a collaborator the engine holds:

- ``HumanInput`` (``human_input``): prompts, the ``user_input`` update;
- ``Handover`` (``continue_as_new``): continue-as-new, what is carried, the
  history WARNING;
- ``RunDeadline`` (``run_deadline``): the run's own deadline;
- ``BudgetMeter`` (``budget_meter``): spend, caps, the ``raise_budget`` update;
- ``WorkstreamSupervisor`` (``workstreams.parent_supervisor``): child runs; the
  run ends after its children;
- ``RunProgress`` (``run_progress``): state, output and node reports;
- ``RunNotices`` (``run_notices``): the run's WARNINGs;
- ``AgentSessions`` (``agent_session``): the main workstream's agents: user
  messages, uploads, IDLE waits, children's reports at each turn boundary;
- ``UserMessages`` (``user_messages``): where a user's message goes.

Activities post every message and write every archive record; the workflow
itself does no I/O.

Deterministic by construction: no clock but ``workflow.now()``, no randomness,
completions processed in the order they happened, logging via ``workflow.logger``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError

from spindle.shared.contracts.errors import (
    ExpressionBudgetSpent,
    NodeFailed,
    NodeVisitsExceeded,
    RunDeadlineExceeded,
    RunFailed,
    RunStartLimited,
    StateWriteRefused,
    to_application_error,
)
from spindle.shared.contracts.runs import (
    FINISH_LOCAL_PATCH,
    NODE_VISITS_PATCH,
    GraphRunInput,
    GraphRunResult,
    NodeReport,
    NodeStatus,
    RunDescription,
    RunStatus,
)
from spindle.shared.graphs import expressions
from spindle.shared.graphs.expressions import ExpressionError
from spindle.shared.graphs.state_reads import node_state_reads, project_state
from spindle.shared.graphs.task_tree import task_run_meta
from spindle.worker.contracts import (
    FINISH_RUN,
    RECORD_RUN_START,
    CallReplay,
    NodeExecution,
    NodeOutcome,
    RunFinish,
    RunRef,
    RunStart,
    RunStartAdmission,
    policies,
)
from spindle.worker.registry import spec_of
from spindle.worker.workflows.agent_session import AgentSessions
from spindle.worker.workflows.budget_meter import BudgetMeter
from spindle.worker.workflows.continue_as_new import CarriedParts, Handover
from spindle.worker.workflows.edge_envelopes import EdgeEnvelopes
from spindle.worker.workflows.expression_budget import install as install_expression_budgets
from spindle.worker.workflows.expression_budget import node_failure, task_budget
from spindle.worker.workflows.human_input import HumanInput
from spindle.worker.workflows.node_runners import NodeRunners
from spindle.worker.workflows.run_deadline import RunDeadline
from spindle.worker.workflows.run_notices import RunNotices, is_run_cancel
from spindle.worker.workflows.run_progress import RunProgress
from spindle.worker.workflows.scheduler import (
    Activation,
    Advance,
    GraphScheduler,
    NodeCompletion,
    NodeVisitCapReached,
)
from spindle.worker.workflows.user_messages import UserMessages
from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor

#: ``workflow.patched`` id: a run that only waits (prompts, children) continues as new
#: when history is long, not only at a node boundary (docs/graphs/long-runs.md).
WAITING_HANDOVER_PATCH = "continue-as-new-while-waiting"


class _RunFailed(Exception):
    """Raised inside the run to stop it as failed, with the user-facing error.

    Args:
        error: the declared error the run fails with (default ``NodeFailed``).
    """

    def __init__(self, message: str, error: type[RunFailed] = NodeFailed) -> None:
        super().__init__(message)
        self.error = error


class _DeadlinePassed(Exception):
    """Raised inside the run when its ``deadline_seconds`` has passed."""


class RunEngine:
    """One run of a ``GraphSpec``, node by node, behind ``GraphRun``'s handlers;
    see the module docstring.

    Attributes:
        prompts: the run's prompts (``GraphRun``'s ``user_input`` update).
        budget: the run's budget (its ``raise_budget`` update).
        workstreams: the run's workstreams (its workstream handlers).
        agents: the main workstream's agents (``complete_agent``, ``FileUploaded``).
        messages: where a user's message goes (the ``user_message`` update).
    """

    def __init__(self, run_input: GraphRunInput) -> None:
        info = workflow.info()
        carried = run_input.carried
        self._input = run_input
        self._graph = run_input.graph
        self._run = RunRef(
            workflow_id=info.workflow_id,
            # Generation 1's run id keys the archive and message ids of every generation.
            run_id=carried.first_run_id if carried is not None else info.run_id,
            stream_id=run_input.stream_id or info.workflow_id,
            workstream_id=run_input.workstream_id,
            tenant_id=run_input.tenant_id,
            graph_name=run_input.graph.name,
            user_id=run_input.user_id,  # tools and nodes see who started it (seed 004)
            replay=CallReplay.of(run_input.replay),  # a fork's recorded tools/LLM, else None
        )
        self._record = RunProgress(run_input)
        # What each taken edge carries to its node (docs/graphs/envelopes.md).
        self._envelopes = EdgeEnvelopes(run_input.graph, self._run, info.start_time.isoformat())
        # Runs recorded before NODE_VISITS_PATCH stopped a node at 1,000 visits.
        legacy = lambda: not workflow.patched(NODE_VISITS_PATCH)  # noqa: E731
        self._scheduler = GraphScheduler(
            run_input.graph, max_node_visits=run_input.max_node_visits, legacy_cap=legacy
        )
        self._status = RunStatus.RUNNING
        self._reads: dict[str, frozenset[str] | None] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._started: dict[str, datetime] = {}
        self._completions: list[NodeCompletion] = []
        self._error: str | None = None
        self._waiting_handover = True  # off in a replay recorded before it existed
        self._notices = RunNotices(self._run)
        # Budgets and deadlines (docs/graphs/budgets.md): counted from activity results.
        self.budget = BudgetMeter(
            run_input.budget, carried.budget if carried else None, self._notices.warn
        )
        self._deadline = RunDeadline(run_input)
        self.workstreams = WorkstreamSupervisor(
            self._run,
            user_id=run_input.user_id,
            max_live=run_input.max_live_workstreams,
            meter=self.budget,
            deadline_at=self._deadline.at,
        )
        self.prompts = HumanInput(run_input.user_id)
        # The agents of the main workstream: user messages, uploads, IDLE waits.
        self.agents = AgentSessions(
            self._run,
            self.workstreams,
            carried.agents if carried else None,
            carried.agent_posts if carried else 0,
        )
        self._runners = NodeRunners(self.budget, self.workstreams, self.prompts, self.agents)
        self.messages = UserMessages(self.prompts, self.agents)
        self._handover = Handover(
            run_input,
            self._run,
            CarriedParts(
                record=self._record,
                scheduler=self._scheduler,
                prompts=self.prompts,
                notices=self._notices,
                workstreams=self.workstreams,
                budget=self.budget,
                deadline=self._deadline,
                agents=self.agents,
                envelopes=self._envelopes,
            ),
        )
        if carried is not None:
            self._handover.take_over(carried)

    # -- the run ---------------------------------------------------------------

    async def run(self) -> GraphRunResult:
        """Run the graph to its end; the result carries the output and node reports.

        Raises:
            ApplicationError: ``NodeFailed`` (non-retryable) when a node failed
                after its retries; the run is then Failed in Temporal.
        """
        install_expression_budgets(self._input.expression_workflow_task_steps)
        # Watches history size on every activation, also while a long node (an
        # agent's turns, a workstream) keeps the run from a node boundary.
        watch = asyncio.create_task(self._handover.watch_history())
        deadline = self._deadline.watch()
        try:
            return await self._run_to_end()
        finally:
            watch.cancel()
            if deadline is not None:
                deadline.cancel()

    async def _run_to_end(self) -> GraphRunResult:
        try:
            # A continued run (carried) recorded its start in its first execution.
            if self._input.scheduled_by is not None and self._input.carried is None:
                refused = await self._record_start(self._input)
                if refused is not None:
                    # Over the tenant's run-start limit: no node runs (docs/schedules.md).
                    raise _RunFailed(refused, RunStartLimited)
            self.workstreams.resume_adopted()
            await self._drive()
            # Non-interactive children run to their end (deadline-bounded).
            await self.workstreams.close("parent_finished", stop_all=False)
        except (asyncio.CancelledError, ActivityError) as exc:
            if not is_run_cancel(exc):
                raise
            await self._stop_nodes()
            # The run's children_policy: stop running children, or let them finish first.
            stop_all = self._input.children_policy == "cancel_children"
            await self.workstreams.close("parent_canceled", stop_all=stop_all)
            self._status = RunStatus.CANCELED
            await self._finish(RunStatus.CANCELED)
            raise
        except _DeadlinePassed:
            await self._stop_nodes()
            stop_all = self._input.children_policy == "cancel_children"
            await self.workstreams.close("timeout", stop_all=stop_all)
            self._status = RunStatus.TIMED_OUT
            self._error = self._deadline.error
            await self._finish(RunStatus.TIMED_OUT)
            raise to_application_error(RunDeadlineExceeded(self._error)) from None
        except _RunFailed as failure:
            await self._stop_nodes()
            await self.workstreams.close("parent_finished", stop_all=True)
            self._status = RunStatus.FAILED
            self._error = str(failure)
            await self._finish(RunStatus.FAILED)
            raise to_application_error(failure.error(self._error)) from None
        self._status = RunStatus.COMPLETED
        await self._handover.warning_posted()  # before COMPLETE: nothing is posted after it
        await self._finish(RunStatus.COMPLETED)
        return GraphRunResult(
            status=RunStatus.COMPLETED,
            output=self._record.output,
            node_reports=list(self._record.reports),
            report_counts=dict(self._record.report_counts),
            generation=self._handover.generation,
            budget=self.budget.state() if self.budget.shown else None,
        )

    async def _drive(self) -> None:
        carried = self._input.carried
        if carried is None:
            self._envelopes.start(workflow.now())
            await self._apply(self._scheduler.start())
        else:
            resumed = [Activation(node_id, visit) for node_id, visit in carried.ready]
            resumed += [Activation(node_id, w.visit) for node_id, w in carried.waits.items()]
            resumed += [Activation(node_id, a.visit) for node_id, a in carried.agents.items()]
            await self._apply(Advance(ready=resumed))
        while not self._scheduler.finished:
            await workflow.wait_condition(
                lambda: bool(self._completions) or self._deadline.passed or self._waited_long()
            )
            if self._deadline.passed:
                raise _DeadlinePassed()
            if not self._completions and self._waited_long():
                # No node boundary comes while prompts (and children) wait, yet messages
                # to children, their progress and their ends grow the history.
                if workflow.patched(WAITING_HANDOVER_PATCH):
                    self._handover.continuing = True
                else:  # recorded before the patch: this run never did it
                    self._waiting_handover = False
            while self._completions:
                done = self._completions.pop(0)
                node_id = done.activation.node_id
                self._tasks.pop(node_id, None)
                if done.outcome is None:
                    failure = node_failure(done.error)
                    raise _RunFailed(self._failed(done.activation, done.error), failure)
                node = self._graph.node(node_id)
                try:  # its writes to shared state and context may be refused
                    self._record.succeeded(node, done.activation.visit, done.outcome)
                except StateWriteRefused as exc:
                    raise _RunFailed(
                        self._failed(done.activation, exc), StateWriteRefused
                    ) from None
                try:
                    advance = self._scheduler.complete(
                        node_id, done.outcome.ports, self._record.state, task_budget()
                    )
                except ExpressionError as exc:
                    # The workflow task's shared budget: the run fails, the task never
                    # runs into the deadlock detector (docs/graphs/index.md#expression-limits).
                    spent = isinstance(exc, expressions.ExpressionBudgetSpent)
                    raise _RunFailed(
                        f"edge condition after node '{node_id}': {exc}",
                        ExpressionBudgetSpent if spent else NodeFailed,
                    ) from exc
                except NodeVisitCapReached as exc:
                    raise _RunFailed(str(exc), NodeVisitsExceeded) from exc
                self._envelopes.delivered(
                    node, done.activation.visit, done.outcome.ports, advance.taken, workflow.now()
                )
                # A node boundary: continue as new here, before the next nodes start,
                # if history is long and nothing but answered-to-be prompts is in flight.
                self._handover.continuing = self._handover.continuing or (
                    self._handover.wanted() and self._at_boundary()
                )
                await self._apply(advance)
            if self._handover.continuing and not self._scheduler.finished:
                await self._continue_as_new()

    def _waited_long(self) -> bool:
        """History is long while the run only waits (prompts asked, children that may
        be handed over): continue as new without a node boundary."""
        return (
            self._waiting_handover
            and not self._handover.continuing
            and self._handover.wanted()
            and self._at_boundary()
        )

    def _at_boundary(self) -> bool:
        """No node in flight but prompts that asked and wait and idle agents; children
        that may be handed over (docs/graphs/long-runs.md)."""
        if self._completions or self.prompts.answered or not self.workstreams.may_hand_over():
            return False
        return all(self.prompts.all_waiting([n]) or self.agents.idle(n) for n in self._tasks)

    async def _continue_as_new(self) -> None:
        """Hand everything to a new run of this workflow (same id) and end this one."""
        await self._handover.drain()
        if self.prompts.answered or not self._at_boundary():
            # An answer came in meanwhile: carry on in this generation.
            await self._apply(Advance(ready=self._handover.call_off()))
            return
        await self._handover.hand_over(self._stop_nodes)

    async def _apply(self, advance: Advance) -> None:
        now = workflow.now()
        for skip in advance.skipped:
            node = self._graph.node(skip.node_id)
            visit = max(self._scheduler.visits(node.id), 1)
            self._record.skipped(node, visit, skip.reason, now)
            self._envelopes.skipped(node.id)
        for warning in advance.warnings:
            await self._notices.warn(warning)
        for activation in advance.ready:
            if self._handover.continuing:
                self._handover.defer(activation)  # started by the next generation
                continue
            self._started[activation.node_id] = workflow.now()
            self._envelopes.activated(activation.node_id)
            reused = reused_outcome(self._input, activation)
            if reused is not None:
                # A fork: the source run's output stands in; no activity runs.
                self._completions.append(NodeCompletion(activation, reused, None))
                continue
            self._tasks[activation.node_id] = asyncio.create_task(self._node_task(activation))

    async def _node_task(self, activation: Activation) -> None:
        try:
            outcome = await self._execute(activation)
        except (FailureError, ExpressionError) as exc:
            self._completions.append(NodeCompletion(activation, None, exc))
        else:
            self._completions.append(NodeCompletion(activation, outcome, None))

    def _failed(self, activation: Activation, error: BaseException | None) -> str:
        node = self._graph.node(activation.node_id)
        started = self._started.get(node.id, workflow.now())
        message = self._record.failed(node, activation.visit, error, started)
        workflow.logger.warning("run %s: %s", self._run.workflow_id, message)
        return message

    async def _stop_nodes(self) -> None:
        self.prompts.stop()
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self.prompts.stopped()

    # -- the run's own activities: its start (when scheduled) and its end -------

    async def _record_start(self, run_input: GraphRunInput) -> str | None:
        """Started by a Temporal schedule, not the gateway: no one wrote the run
        document and stream metadata yet, nor took its run-start permit (see
        worker/activities/run_start.py). Returns why the run may not run, or None.

        The activity's commands are the same as before permits; a history recorded
        before them holds an empty result, which reads as admitted.
        """
        admission = await workflow.execute_activity(
            RECORD_RUN_START,
            RunStart(
                run=self._run,
                user_id=run_input.user_id,
                input=run_input.input,
                context=run_input.context,
                scheduled_by=run_input.scheduled_by,
            ),
            activity_id="record_start",
            start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
            retry_policy=policies.LIFECYCLE_RETRY,
            result_type=RunStartAdmission,
        )
        if admission.admitted:
            return None
        return admission.error or "over the run-start limit (rate_limit_run_starts)"

    async def _finish(self, status: RunStatus) -> None:
        finish = RunFinish(
            run=self._run,
            status=status,
            output=self._record.output,
            error=self._error,
            # What the run never did, its end need not undo: a MongoDB round trip each.
            prompts_asked=self.prompts.asked,
            tracks_tasks=task_run_meta(self._input.meta) is not None,
            # Kept on the run's document and webhook: GET /runs/{id} shows it after the end.
            budget=self.budget.state() if self.budget.shown else None,
            # The run's facts after its end (docs/graphs/long-runs.md#after-the-end).
            generations=self._handover.generation,
            node_counts=dict(self._record.report_counts),
            decided=self._record.decided_reports(self.workstreams.describe()),
        )
        # The run's own last step runs on its worker: no trip through the task queue
        # (two workflow tasks and an activity task less a run; docs/benchmarks.md).
        local = workflow.patched(FINISH_LOCAL_PATCH)
        execute = workflow.execute_local_activity if local else workflow.execute_activity
        await execute(
            FINISH_RUN,
            finish,
            activity_id="finish",
            start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
            retry_policy=policies.LIFECYCLE_RETRY,
        )

    # -- node dispatch ---------------------------------------------------------

    async def _execute(self, activation: Activation) -> NodeOutcome:
        # The node as its activities see it: task queue resolved from the graph.
        node = policies.routed(self._graph, self._graph.node(activation.node_id))
        spec = spec_of(node.type)
        if node.id not in self._reads:
            self._reads[node.id] = node_state_reads(node, spec)
        inputs = self._envelopes.inbound(node.id, self._record.state)
        reads = self._reads[node.id]
        if reads is not None:  # the envelopes' payloads, by state key
            reads = reads | {envelope.payload_key for envelope in inputs}
        execution = NodeExecution(
            run=self._run,
            node=node,
            visit=activation.visit,
            # Only what the node reads: history per node stays constant (docs/design.md §4).
            state=project_state(self._record.state, reads),
            started_at=workflow.now().isoformat(),
            inputs=inputs,
        )
        return await self._runners.run(execution, spec)

    # -- describe query --------------------------------------------------------

    def describe(self) -> RunDescription:
        """The live state: status, running nodes, the oldest pending prompt, reports, the
        agents waiting for a user message."""
        current = self._scheduler.running
        status = self._status
        if status is RunStatus.RUNNING and self.prompts.all_pending(current):
            status = RunStatus.PAUSED
        if status is RunStatus.RUNNING and self.budget.paused:
            status = RunStatus.PAUSED  # held at a budget cap
        return RunDescription(
            status=status,
            graph_name=self._graph.name,
            current_nodes=current,
            pending_input=self.prompts.oldest_pending,
            node_reports=list(self._record.reports),
            output=self._record.output,
            error=self._error,
            report_counts=dict(self._record.report_counts),
            generation=self._handover.generation,
            budget=self.budget.state() if self.budget.shown else None,
            deadline_at=self._deadline.iso,
            awaiting_message=self.agents.awaiting_message(),
        )


def reused_outcome(run_input: GraphRunInput, activation: Activation) -> NodeOutcome | None:
    """The recorded outcome of a node a fork reuses (first visit only), else None."""
    replayed = run_input.replayed_outputs
    if activation.visit != 1 or activation.node_id not in replayed:
        return None
    node = run_input.graph.node(activation.node_id)
    recorded = replayed[node.id]
    return NodeOutcome(
        output=recorded.output,
        meta=recorded.meta,
        report=NodeReport(
            node_id=node.id,
            node_type=node.type,
            status=NodeStatus.REUSED,
            started_at=workflow.now().isoformat(),
            output_summary=f"reused from {run_input.fork_of or 'the source run'}",
            source_run=run_input.fork_of,
        ),
    )
