"""``RunEngine``: the logic of one durable run of a graph, behind ``GraphRun``.

``GraphRun`` (``graph_run.py``) is the Temporal surface: its init, run, updates,
query and signals, each a line that calls in here. Temporal's sandbox imports a
workflow's module afresh for every run and applies ``@workflow.defn`` to its class
again (docs/operations/scaling.md, "Workflow sandbox"), so that module stays small;
this one is passed through and imported once per worker.

The run decides what runs (``spindle.worker.workflows.scheduler``) and runs each node
the way its type's spec says (``NodeTypeSpec.runs``, looked up in ``NODE_RUNNERS``):
``execute_node`` for tool/router/output/custom nodes, an LLM loop for ``agent`` nodes
(``spindle.worker.workflows.agent_loop``), ask → wait for a valid ``UserInput`` update →
accept for ``prompt`` nodes, a child launch for ``workstream`` nodes. Workstreams (child runs) are
``spindle.worker.workflows.workstreams.parent_supervisor``'s; the run ends after its children.
Activities post every message and write every archive record; the workflow
itself does no I/O.

Deterministic by construction: no clock but ``workflow.now()``, no randomness,
completions processed in the order they happened, logging via ``workflow.logger``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, FailureError, RetryState, is_cancelled_exception

from spindle.shared.contracts.budgets import BudgetAck, BudgetRaise
from spindle.shared.contracts.errors import (
    AlreadyAnswered,
    Forbidden,
    InputInvalid,
    NodeFailed,
    NotWaiting,
    PromptExpired,
    RunDeadlineExceeded,
    to_application_error,
)
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import (
    ASK_SETTLES_ON_CANCEL_PATCH,
    CANCEL_IN_ACTIVITY_PATCH,
    EXPIRY_USER,
    FINISH_LOCAL_PATCH,
    PURE_NODES_LOCAL_PATCH,
    CarriedState,
    CarriedWait,
    ExpiryAction,
    GraphRunInput,
    GraphRunResult,
    NodeReport,
    NodeStatus,
    PendingInput,
    RunDescription,
    RunStatus,
    SignalAck,
    UserInput,
)
from spindle.shared.graphs.expressions import ExpressionError
from spindle.shared.graphs.node_params import ExpiryAnswer, PromptParams, default_ui_schema
from spindle.shared.graphs.node_types import PROMPT, TOOL, NodeTypeSpec, RunKind
from spindle.shared.graphs.state_reads import node_state_reads, project_state
from spindle.shared.graphs.task_tree import task_run_meta
from spindle.worker import policies
from spindle.worker.activities.params import resolve_params, validate_params
from spindle.worker.contracts import (
    ACCEPT_INPUT,
    EXECUTE_NODE,
    EXPIRE_INPUT,
    FINISH_RUN,
    POST_MESSAGE,
    RECORD_RUN_START,
    REQUEST_INPUT,
    InputAcceptance,
    InputExpiry,
    InputRequest,
    NodeExecution,
    NodeOutcome,
    RunFinish,
    RunNotice,
    RunRef,
    RunStart,
)
from spindle.worker.hitl import resolve_answer
from spindle.worker.registry import spec_of
from spindle.worker.workflows.agent_loop import run_agent
from spindle.worker.workflows.budget_meter import BudgetMeter
from spindle.worker.workflows.items import run_map
from spindle.worker.workflows.scheduler import (
    Activation,
    Advance,
    GraphScheduler,
    NodeCompletion,
)
from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor
from spindle.worker.workflows.workstreams.parent_tools import offered_tools, workstream_toolbox


class _RunFailed(Exception):
    """Raised inside the run to stop it as failed, with the user-facing error."""


class _DeadlinePassed(Exception):
    """Raised inside the run when its ``deadline_seconds`` has passed."""


class RunEngine:
    """One run of a ``GraphSpec``, node by node, behind ``GraphRun``'s handlers;
    see the module docstring."""

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
        )
        self._state: dict[str, Any] = {
            "input": run_input.input,
            "context": dict(run_input.context),
            "meta": dict(run_input.meta),
        }
        self._scheduler = GraphScheduler(run_input.graph)
        self._status = RunStatus.RUNNING
        # Bounded: one report per node execution would grow without end (docs/design.md §10).
        self._reports: deque[NodeReport] = deque(maxlen=policies.REPORTS_KEPT)
        self._report_counts: dict[str, int] = {}
        self._reads: dict[str, frozenset[str] | None] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False  # the run is stopping its nodes (see _stop_nodes)
        self._started: dict[str, datetime] = {}
        self._completions: list[NodeCompletion] = []
        self._pending: dict[str, PendingInput] = {}  # insertion order = oldest first
        self._answers: dict[str, tuple[dict[str, Any], UserInput]] = {}
        self._output: Any = None
        self._output_node_ran = False
        self._error: str | None = None
        self._notices = 0
        # Budgets and deadlines (docs/graphs/budgets.md): counted from activity results.
        self._budget = BudgetMeter(
            run_input.budget, carried.budget if carried else None, self._post_budget_notice
        )
        self._deadline_at: datetime | None = None
        if carried is not None and carried.deadline_at is not None:
            self._deadline_at = datetime.fromisoformat(carried.deadline_at)
        elif run_input.deadline_seconds is not None:
            self._deadline_at = workflow.now() + timedelta(seconds=run_input.deadline_seconds)
        self._deadline_passed = False
        self._workstreams = WorkstreamSupervisor(
            self._run,
            user_id=run_input.user_id,
            max_live=run_input.max_live_workstreams,
            meter=self._budget,
            deadline_at=self._deadline_at,
        )
        self._generation = 1
        self._history_warned = False
        self._history_warning: asyncio.Task[None] | None = None
        self._continuing = False
        self._deferred: list[Activation] = []
        self._waiting: dict[str, CarriedWait] = {}  # prompts that asked; carried if we continue
        self._carried_waits: dict[str, CarriedWait] = {}
        # Prompts no longer open, by node: "answered" or "expired" (why a late answer is refused).
        self._closed: dict[str, str] = {}
        self._prompts_asked = False  # in any generation: finish_run closes their records
        if carried is not None:
            self._take_over(carried)

    @property
    def workstreams(self) -> WorkstreamSupervisor:
        """The run's workstreams (``GraphRun``'s workstream handlers work on it)."""
        return self._workstreams

    def _take_over(self, carried: CarriedState) -> None:
        """Continue where the previous generation stopped (continue-as-new)."""
        self._generation = carried.generation
        self._scheduler.restore(carried.scheduler)
        self._state = dict(carried.state)
        self._output, self._output_node_ran = carried.output, carried.output_node_ran
        self._reports.extend(carried.reports)
        self._report_counts = dict(carried.report_counts)
        self._notices = carried.notices
        self._history_warned = carried.history_warned
        self._carried_waits = dict(carried.waits)
        self._prompts_asked = carried.prompts_asked
        self._workstreams.restore_counts(carried.workstream_counts)
        self._workstreams.restore(carried.workstreams)

    # -- the run ---------------------------------------------------------------

    async def run(self) -> GraphRunResult:
        """Run the graph to its end; the result carries the output and node reports.

        Raises:
            ApplicationError: ``NodeFailed`` (non-retryable) when a node failed
                after its retries; the run is then Failed in Temporal.
        """
        # Watches history size on every activation, also while a long node (an
        # agent's turns, a workstream) keeps the run from a node boundary.
        watch = asyncio.create_task(self._watch_history())
        deadline = asyncio.create_task(self._watch_deadline()) if self._deadline_at else None
        try:
            return await self._run_to_end()
        finally:
            watch.cancel()
            if deadline is not None:
                deadline.cancel()

    async def _watch_deadline(self) -> None:
        """One durable timer to the run's deadline; at it the run stops (``timed_out``)."""
        assert self._deadline_at is not None
        remaining = (self._deadline_at - workflow.now()).total_seconds()
        if remaining > 0:
            await asyncio.sleep(remaining)
        self._deadline_passed = True

    async def _run_to_end(self) -> GraphRunResult:
        try:
            # A continued run (carried) recorded its start in its first execution.
            if self._input.scheduled_by is not None and self._input.carried is None:
                await self._record_start(self._input)
            self._workstreams.resume_adopted()
            await self._drive()
            # Non-interactive children run to their end (deadline-bounded).
            await self._workstreams.close("parent_finished", stop_all=False)
        except (asyncio.CancelledError, ActivityError) as exc:
            if not _is_run_cancel(exc):
                raise
            await self._stop_nodes()
            # The run's children_policy: stop running children, or let them finish first.
            stop_all = self._input.children_policy == "cancel_children"
            await self._workstreams.close("parent_canceled", stop_all=stop_all)
            self._status = RunStatus.CANCELED
            await self._finish(RunStatus.CANCELED)
            raise
        except _DeadlinePassed:
            await self._stop_nodes()
            stop_all = self._input.children_policy == "cancel_children"
            await self._workstreams.close("timeout", stop_all=stop_all)
            self._status = RunStatus.TIMED_OUT
            self._error = (
                f"the run passed its deadline ({self._input.deadline_seconds} s) and was stopped"
            )
            await self._finish(RunStatus.TIMED_OUT)
            raise to_application_error(RunDeadlineExceeded(self._error)) from None
        except _RunFailed as failure:
            await self._stop_nodes()
            await self._workstreams.close("parent_finished", stop_all=True)
            self._status = RunStatus.FAILED
            self._error = str(failure)
            await self._finish(RunStatus.FAILED)
            raise to_application_error(NodeFailed(self._error)) from None
        self._status = RunStatus.COMPLETED
        if self._history_warning is not None:
            await self._history_warning  # before COMPLETE: nothing is posted after it
        await self._finish(RunStatus.COMPLETED)
        return GraphRunResult(
            status=RunStatus.COMPLETED,
            output=self._output,
            node_reports=list(self._reports),
            report_counts=dict(self._report_counts),
            generation=self._generation,
            budget=self._budget.state() if self._budget_shown() else None,
        )

    async def _drive(self) -> None:
        carried = self._input.carried
        if carried is None:
            await self._apply(self._scheduler.start())
        else:
            resumed = [Activation(node_id, visit) for node_id, visit in carried.ready]
            resumed += [Activation(node_id, w.visit) for node_id, w in carried.waits.items()]
            await self._apply(Advance(ready=resumed))
        while not self._scheduler.finished:
            await workflow.wait_condition(lambda: bool(self._completions) or self._deadline_passed)
            if self._deadline_passed:
                raise _DeadlinePassed()
            while self._completions:
                done = self._completions.pop(0)
                node_id = done.activation.node_id
                self._tasks.pop(node_id, None)
                if done.outcome is None:
                    raise _RunFailed(self._record_failure(done.activation, done.error))
                self._record_success(done.activation, done.outcome)
                try:
                    advance = self._scheduler.complete(node_id, done.outcome.ports, self._state)
                except ExpressionError as exc:
                    raise _RunFailed(f"edge condition after node '{node_id}': {exc}") from exc
                # A node boundary: continue as new here, before the next nodes start,
                # if history is long and nothing but answered-to-be prompts is in flight.
                self._continuing = self._continuing or (
                    self._continue_wanted() and self._at_boundary()
                )
                await self._apply(advance)
            if self._continuing and not self._scheduler.finished:
                await self._continue_as_new()

    # -- history volume: warning and continue-as-new ----------------------------

    def _history_large(self) -> bool:
        info = workflow.info()
        limit = self._input.history_warning_events or policies.HISTORY_WARNING_EVENTS
        return (
            info.get_current_history_length() >= limit
            or info.get_current_history_size() >= policies.HISTORY_WARNING_BYTES
        )

    async def _watch_history(self) -> None:
        await workflow.wait_condition(lambda: self._history_warned or self._history_large())
        self._warn_history()

    def _warn_history(self) -> None:
        """One WARNING per run (all generations) once history passes half a limit."""
        if self._history_warned or not self._history_large():
            return
        self._history_warned = True
        info = workflow.info()
        events, size = info.get_current_history_length(), info.get_current_history_size()
        self._history_warning = asyncio.create_task(
            self._post_warning(
                f"run history is large: {events} events, {size / 1_048_576:.1f} MB in this "
                f"generation (Temporal stops a run at 51,200 events or 50 MB); the run continues "
                "as new at node boundaries, but a long node (agent, workstream) may hold it"
            )
        )

    def _continue_wanted(self) -> bool:
        info = workflow.info()
        after = self._input.continue_as_new_after_events
        if after is not None and info.get_current_history_length() >= after:
            return True
        return info.is_continue_as_new_suggested()

    def _at_boundary(self) -> bool:
        """No node in flight but prompts that asked and wait; children that may be
        handed over (docs/graphs/long-runs.md)."""
        if self._completions or self._answers or not self._workstreams.may_hand_over():
            return False
        return all(node_id in self._waiting for node_id in self._tasks)

    async def _continue_as_new(self) -> None:
        """Hand everything to a new run of this workflow (same id) and end this one."""
        # Updates accepted in this generation finish here, not half in the next one.
        await workflow.wait_condition(workflow.all_handlers_finished)
        # Said in this generation if due: the next one only knows that it was said.
        self._warn_history()
        if self._history_warning is not None:
            await self._history_warning
        if self._answers or not self._at_boundary():
            # An answer came in meanwhile: carry on in this generation.
            self._continuing = False
            deferred, self._deferred = self._deferred, []
            await self._apply(Advance(ready=deferred))
            return
        waits = dict(self._waiting)
        await self._stop_nodes()
        carried = CarriedState(
            generation=self._generation + 1,
            first_run_id=self._run.run_id,
            scheduler=self._scheduler.snapshot(),
            state=self._state,
            output=self._output,
            output_node_ran=self._output_node_ran,
            ready=[(a.node_id, a.visit) for a in self._deferred],
            waits=waits,
            reports=list(self._reports),
            report_counts=self._report_counts,
            notices=self._notices,
            history_warned=self._history_warned,
            workstream_counts=self._workstreams.counts,
            workstreams=self._workstreams.carried(),
            budget=self._budget.carry() if self._budget_shown() else None,
            deadline_at=self._deadline_at.isoformat() if self._deadline_at else None,
            prompts_asked=self._prompts_asked,
        )
        workflow.logger.info(
            "run %s continues as new (generation %d)", self._run.workflow_id, carried.generation
        )
        workflow.continue_as_new(self._input.model_copy(update={"carried": carried}))

    def _add_report(self, report: NodeReport) -> None:
        self._reports.append(report)
        self._report_counts[report.status] = self._report_counts.get(report.status, 0) + 1

    async def _apply(self, advance: Advance) -> None:
        now = workflow.now()
        for skip in advance.skipped:
            node = self._graph.node(skip.node_id)
            self._add_report(
                NodeReport(
                    node_id=node.id,
                    node_type=node.type,
                    status=NodeStatus.SKIPPED,
                    visit=max(self._scheduler.visits(node.id), 1),
                    started_at=now.isoformat(),
                    output_summary=f"skipped: {skip.reason}",
                )
            )
        for warning in advance.warnings:
            await self._post_warning(warning)
        for activation in advance.ready:
            if self._continuing:
                self._deferred.append(activation)  # started by the next generation
                continue
            self._started[activation.node_id] = workflow.now()
            reused = self._reused_outcome(activation)
            if reused is not None:
                # A fork: the source run's output stands in; no activity runs.
                self._completions.append(NodeCompletion(activation, reused, None))
                continue
            self._tasks[activation.node_id] = asyncio.create_task(self._node_task(activation))

    def _reused_outcome(self, activation: Activation) -> NodeOutcome | None:
        """The recorded outcome of a node a fork reuses (first visit only), else None."""
        replayed = self._input.replayed_outputs
        if activation.visit != 1 or activation.node_id not in replayed:
            return None
        node = self._graph.node(activation.node_id)
        recorded = replayed[node.id]
        return NodeOutcome(
            output=recorded.output,
            meta=recorded.meta,
            report=NodeReport(
                node_id=node.id,
                node_type=node.type,
                status=NodeStatus.SUCCESS,
                started_at=workflow.now().isoformat(),
                output_summary=f"reused from {self._input.fork_of or 'the source run'}",
            ),
        )

    async def _node_task(self, activation: Activation) -> None:
        try:
            outcome = await self._execute(activation)
        except (FailureError, ExpressionError) as exc:
            self._completions.append(NodeCompletion(activation, None, exc))
        else:
            self._completions.append(NodeCompletion(activation, outcome, None))

    def _record_success(self, activation: Activation, outcome: NodeOutcome) -> None:
        node = self._graph.node(activation.node_id)
        self._state[node.id] = outcome.output
        self._state["_previous"] = outcome.output
        if outcome.meta:
            self._state["meta"] = {**self._state["meta"], **outcome.meta}
        spec = spec_of(node.type)
        if spec is not None and spec.sets_run_output:
            self._output, self._output_node_ran = outcome.output, True
        elif not self._output_node_ran:
            self._output = outcome.output
        self._add_report(outcome.report.model_copy(update={"visit": activation.visit}))

    def _record_failure(self, activation: Activation, error: BaseException | None) -> str:
        node = self._graph.node(activation.node_id)
        cause: BaseException | None = error
        attempt = 1
        if isinstance(error, ActivityError):
            cause = error.cause or error
            if error.retry_state == RetryState.MAXIMUM_ATTEMPTS_REACHED:
                base = policies.type_retry(spec_of(node.type))
                attempt = policies.node_retry(node, base).maximum_attempts
        text = cause.message if isinstance(cause, FailureError) else str(cause)
        message = f"node '{node.id}' ({node.type}) failed: {text}"
        started = self._started.get(node.id, workflow.now())
        self._add_report(
            NodeReport(
                node_id=node.id,
                node_type=node.type,
                status=NodeStatus.FAILED,
                attempt=attempt,
                visit=activation.visit,
                started_at=started.isoformat(),
                duration_ms=(workflow.now() - started).total_seconds() * 1000,
                error=text,
            )
        )
        workflow.logger.warning("run %s: %s", self._run.workflow_id, message)
        return message

    async def _stop_nodes(self) -> None:
        self._stopping = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        self._pending.clear()

    async def _record_start(self, run_input: GraphRunInput) -> None:
        # Started by a Temporal schedule, not the gateway: no one wrote the run
        # document and stream metadata yet (see worker/activities/run_start.py).
        await workflow.execute_activity(
            RECORD_RUN_START,
            RunStart(
                run=self._run,
                user_id=run_input.user_id,
                input=run_input.input,
                context=run_input.context,
            ),
            activity_id="record_start",
            start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
            retry_policy=policies.LIFECYCLE_RETRY,
        )

    async def _finish(self, status: RunStatus) -> None:
        finish = RunFinish(
            run=self._run,
            status=status,
            output=self._output,
            error=self._error,
            # What the run never did, its end need not undo: a MongoDB round trip each.
            prompts_asked=self._prompts_asked,
            tracks_tasks=task_run_meta(self._input.meta) is not None,
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

    async def _post_budget_notice(self, text: str, details: dict[str, Any]) -> None:
        await self._post_warning(text, details)

    async def _post_warning(self, text: str, details: dict[str, Any] | None = None) -> None:
        self._notices += 1
        workflow.logger.warning("run %s: %s", self._run.workflow_id, text)
        try:
            await workflow.execute_activity(
                POST_MESSAGE,
                RunNotice(
                    run=self._run, type=int(AgentMessageType.WARNING), text=text, details=details
                ),
                activity_id=f"notice.{self._notices}",
                start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
                retry_policy=policies.NOTICE_RETRY,
            )
        except ActivityError as exc:
            # A notice is best effort, but the run's cancel is not: the SDK turns the
            # cancel of the task awaiting it into this error, and a run that went on
            # would wait forever for nodes that no longer come.
            if _is_run_cancel(exc):
                raise
            workflow.logger.warning("cannot post warning %r: %s", text, exc)

    # -- node dispatch ---------------------------------------------------------

    async def _execute(self, activation: Activation) -> NodeOutcome:
        # The node as its activities see it: task queue resolved from the graph.
        node = policies.routed(self._graph, self._graph.node(activation.node_id))
        spec = spec_of(node.type)
        if node.id not in self._reads:
            self._reads[node.id] = node_state_reads(node, spec)
        execution = NodeExecution(
            run=self._run,
            node=node,
            visit=activation.visit,
            # Only what the node reads: history per node stays constant (docs/design.md §4).
            state=project_state(self._state, self._reads[node.id]),
            started_at=workflow.now().isoformat(),
        )
        run_kind = spec.runs if spec is not None else RunKind.ACTIVITY
        return await NODE_RUNNERS[run_kind](self, execution, spec)

    async def _run_agent(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        toolbox = workstream_toolbox(self._workstreams, offered_tools(execution))
        return await run_agent(execution, toolbox=toolbox, meter=self._budget)

    async def _run_workstream(
        self, execution: NodeExecution, spec: NodeTypeSpec | None
    ) -> NodeOutcome:
        return await self._workstreams.run_node(execution)

    async def _run_map(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        # Each item runs the map's inline node: one tool call per item for budgets.
        await self._budget.gate("tool")
        outcome = await run_map(execution, spec)
        items = outcome.output.get("items") if isinstance(outcome.output, dict) else None
        self._budget.tools_used(len(items) if isinstance(items, list) else 0)
        return outcome

    async def _run_activity(
        self, execution: NodeExecution, spec: NodeTypeSpec | None
    ) -> NodeOutcome:
        """``execute_node``, as a local activity when the node says ``local``."""
        node = execution.node
        if node.type == TOOL.name:  # a tool node is one tool call for budgets
            await self._budget.gate("tool")
            outcome = await self._execute_node(execution, spec)
            self._budget.tools_used()
            return outcome
        return await self._execute_node(execution, spec)

    async def _execute_node(
        self, execution: NodeExecution, spec: NodeTypeSpec | None
    ) -> NodeOutcome:
        node = execution.node
        activity_id = f"{node.id}.{execution.visit}"
        retry = policies.node_retry(node, policies.type_retry(spec))
        # A type's default (router, output) is new: runs recorded before it replay remote.
        if policies.runs_local(node, spec) and (
            node.local or workflow.patched(PURE_NODES_LOCAL_PATCH)
        ):
            result: NodeOutcome = await workflow.execute_local_activity(
                EXECUTE_NODE,
                execution,
                result_type=NodeOutcome,
                activity_id=activity_id,
                start_to_close_timeout=policies.node_timeout(node, spec),
                retry_policy=retry,
            )
            return result
        remote: NodeOutcome = await workflow.execute_activity(
            EXECUTE_NODE,
            execution,
            result_type=NodeOutcome,
            activity_id=activity_id,
            start_to_close_timeout=policies.node_timeout(node, spec),
            heartbeat_timeout=policies.node_heartbeat(node),
            retry_policy=retry,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        return remote

    async def _ask_human(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        node = execution.node
        carried = self._carried_waits.pop(node.id, None)
        if carried is not None:
            # Asked by an earlier generation: wait for the answer without asking again;
            # its expiry (``pending.expires_at``) is carried with it.
            pending = carried.pending
            execution = execution.model_copy(update={"started_at": carried.started_at})
        else:
            pending = self._new_prompt(execution)
        self._pending[node.id] = pending
        self._closed.pop(node.id, None)
        try:
            if carried is None:
                self._prompts_asked = True
                await workflow.execute_activity(
                    REQUEST_INPUT,
                    InputRequest(execution=execution, pending=pending, owner=self._input.user_id),
                    activity_id=f"{node.id}.{execution.visit}.ask",
                    start_to_close_timeout=policies.node_timeout(node),
                    retry_policy=policies.LIFECYCLE_RETRY,
                    task_queue=node.task_queue,
                    priority=policies.node_priority(node),
                    # It posts the prompt and files it in the inbox; a cancel must not
                    # let it do so after finish_run closed the run's prompts.
                    cancellation_type=policies.ask_cancellation(
                        workflow.patched(ASK_SETTLES_ON_CANCEL_PATCH)
                    ),
                )
                if self._stopping:
                    # The ask ended after the cancel reached it, and Temporal reports
                    # that as its result: the cancel still stands, nothing waits.
                    raise asyncio.CancelledError()
            self._waiting[node.id] = CarriedWait(
                visit=execution.visit, started_at=execution.started_at, pending=pending
            )
            answered = await self._answer_or_expiry(node.id, pending)
        finally:
            self._pending.pop(node.id, None)
            self._waiting.pop(node.id, None)
        if not answered:
            self._closed[node.id] = "expired"
            return await self._expire(execution, pending)
        answer, user_input = self._answers.pop(node.id)
        return await self._accept(execution, pending, answer, user_input)

    def _new_prompt(self, execution: NodeExecution) -> PendingInput:
        node = execution.node
        resolved = resolve_params(node, execution.state, templates=PROMPT.templates)
        params = validate_params(node, resolved, PromptParams)
        now = workflow.now()
        expiry = params.on_expiry
        expires = params.expires_in_seconds
        return PendingInput(
            node_id=node.id,
            prompt=params.prompt,
            ui_schema=params.ui_schema or default_ui_schema(node.id, params.prompt, params.title),
            requested_at=now.isoformat(),
            title=params.title,
            visit=execution.visit,
            expires_at=(now + timedelta(seconds=expires)).isoformat() if expires else None,
            on_expiry=(
                None
                if not expires
                else ExpiryAction.ANSWER
                if isinstance(expiry, ExpiryAnswer)
                else ExpiryAction(expiry or ExpiryAction.FAIL)
            ),
            expiry_answer=expiry.answer if isinstance(expiry, ExpiryAnswer) else None,
            assignees=params.assignees,
            roles=params.roles,
        )

    async def _answer_or_expiry(self, node_id: str, pending: PendingInput) -> bool:
        """Wait for the answer, or until the prompt expires; True when answered.

        The expiry is a durable timer (only for prompts that expire, so runs of
        graphs without expiry keep their command sequence); a run continued as
        new waits only for what is left of it.
        """
        if pending.expires_at is None:
            await workflow.wait_condition(lambda: node_id in self._answers)
            return True
        left = datetime.fromisoformat(pending.expires_at) - workflow.now()
        if left > timedelta(0):
            # On timeout it expired; an answer in the same workflow task still wins.
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(lambda: node_id in self._answers, timeout=left)
        return node_id in self._answers

    async def _expire(self, execution: NodeExecution, pending: PendingInput) -> NodeOutcome:
        """Take the prompt's ``on_expiry`` action (docs/graphs/node-types.md)."""
        node = execution.node
        outcome: NodeOutcome = await workflow.execute_activity(
            EXPIRE_INPUT,
            InputExpiry(execution=execution, pending=pending),
            result_type=NodeOutcome,
            activity_id=f"{node.id}.{execution.visit}.expire",
            start_to_close_timeout=policies.node_timeout(node),
            retry_policy=policies.LIFECYCLE_RETRY,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        if pending.on_expiry is ExpiryAction.ANSWER:
            answer = dict(pending.expiry_answer or {})
            user_input = UserInput(data=answer, user_id=EXPIRY_USER)
            return await self._accept(execution, pending, answer, user_input)
        if pending.on_expiry is ExpiryAction.SKIP:
            return outcome
        raise to_application_error(
            NodeFailed(
                f"prompt expired at {pending.expires_at} without an answer (on_expiry: fail)"
            )
        )

    async def _accept(
        self,
        execution: NodeExecution,
        pending: PendingInput,
        answer: dict[str, Any],
        user_input: UserInput,
    ) -> NodeOutcome:
        node = execution.node
        result: NodeOutcome = await workflow.execute_activity(
            ACCEPT_INPUT,
            InputAcceptance(
                execution=execution,
                pending=pending,
                answer=answer,
                user_input=user_input,
                # The update's workflow task: the condition woke in the same one.
                answered_at=workflow.now().isoformat(),
            ),
            result_type=NodeOutcome,
            activity_id=f"{node.id}.{execution.visit}.answer",
            start_to_close_timeout=policies.node_timeout(node),
            retry_policy=policies.LIFECYCLE_RETRY,
            task_queue=node.task_queue,
            priority=policies.node_priority(node),
        )
        return result

    # -- HITL update and describe query ----------------------------------------

    def accept_answer(self, user_input: UserInput) -> SignalAck:
        """Take the answer to a pending prompt (``check_answer`` validated it first)."""
        pending = self._pending_for(user_input)
        answer = self._checked_answer(pending, user_input)
        # Removed here, not when the prompt task resumes, so a second answer in
        # the same workflow task is refused instead of overwriting this one.
        del self._pending[pending.node_id]
        self._closed[pending.node_id] = "answered"
        self._answers[pending.node_id] = (answer, user_input)
        return SignalAck(status="accepted", message=f"answer to '{pending.node_id}' accepted")

    def check_answer(self, user_input: UserInput) -> None:
        """Refuse an answer no open prompt takes (see ``_pending_for``)."""
        self._checked_answer(self._pending_for(user_input), user_input)

    def _pending_for(self, user_input: UserInput) -> PendingInput:
        """The prompt ``user_input`` answers, if it is still open and its sender may answer.

        Raises:
            ApplicationError: ``AlreadyAnswered`` / ``PromptExpired`` / ``NotWaiting``
                (409) when no such prompt is open, ``Forbidden`` (403) when the
                sender is not among its assignees (the gateway checked first:
                this is the second line, docs/operations/threat-model.md).
        """
        if user_input.node_id is not None:
            pending = self._pending.get(user_input.node_id)
        else:
            pending = next(iter(self._pending.values()), None)
        if pending is None:
            raise to_application_error(self._not_waiting(user_input.node_id))
        if pending.expires_at is not None and workflow.now() >= datetime.fromisoformat(
            pending.expires_at
        ):
            raise to_application_error(
                PromptExpired(
                    f"prompt '{pending.node_id}' expired at {pending.expires_at}; "
                    "the answer came too late and was not taken",
                    context={"node_id": pending.node_id, "expires_at": pending.expires_at},
                )
            )
        if pending.assigned and not (
            user_input.run_control or pending.assigned_to(user_input.user_id, user_input.roles)
        ):
            raise to_application_error(
                Forbidden(
                    f"prompt '{pending.node_id}' may be answered only by {pending.answerers()}",
                    context={"node_id": pending.node_id},
                )
            )
        return pending

    def _not_waiting(self, node_id: str | None) -> NotWaiting:
        """Why no prompt takes this answer: answered already, expired, or never asked."""
        closed = node_id if node_id is not None else next(reversed(self._closed), None)
        why = self._closed.get(closed) if closed is not None else None
        context: dict[str, Any] = {"waiting_on": list(self._pending)}
        if why == "answered":
            return AlreadyAnswered(
                f"prompt '{closed}' was answered already; this answer was not taken",
                context={**context, "node_id": closed},
            )
        if why == "expired":
            return PromptExpired(
                f"prompt '{closed}' expired; the answer came too late and was not taken",
                context={**context, "node_id": closed},
            )
        if node_id is not None:
            return NotWaiting(
                f"the run is not waiting for input on node '{node_id}'", context=context
            )
        return NotWaiting("the run is not waiting for input")

    @staticmethod
    def _checked_answer(pending: PendingInput, user_input: UserInput) -> dict[str, Any]:
        try:
            return resolve_answer(pending, user_input)
        except InputInvalid as exc:
            raise to_application_error(exc) from None

    def describe(self) -> RunDescription:
        """The live state: status, running nodes, the oldest pending prompt, reports."""
        current = self._scheduler.running
        status = self._status
        if status is RunStatus.RUNNING and self._pending and set(current) <= set(self._pending):
            status = RunStatus.PAUSED
        if status is RunStatus.RUNNING and self._budget.paused:
            status = RunStatus.PAUSED  # held at a budget cap
        return RunDescription(
            status=status,
            graph_name=self._graph.name,
            current_nodes=current,
            pending_input=next(iter(self._pending.values()), None),
            node_reports=list(self._reports),
            output=self._output,
            error=self._error,
            report_counts=dict(self._report_counts),
            generation=self._generation,
            budget=self._budget.state() if self._budget_shown() else None,
            deadline_at=self._deadline_at.isoformat() if self._deadline_at else None,
        )

    def _budget_shown(self) -> bool:
        return self._input.budget is not None or self._budget.limited

    # -- budget update ---------------------------------------------------------

    def raise_budget(self, raised: BudgetRaise) -> BudgetAck:
        """Raise the run's caps; a run held at a cap resumes when none is reached."""
        resumed = self._budget.raise_limits(raised)
        return BudgetAck(budget=self._budget.state(), resumed=resumed)

    def check_raise(self, raised: BudgetRaise) -> None:
        """Refuse a raise that lowers a cap below what is spent."""
        self._budget.check_raise(raised)


NodeRunner = Callable[[RunEngine, NodeExecution, NodeTypeSpec | None], Awaitable[NodeOutcome]]

NODE_RUNNERS: dict[RunKind, NodeRunner] = {
    RunKind.ACTIVITY: RunEngine._run_activity,
    RunKind.AGENT_LOOP: RunEngine._run_agent,
    RunKind.HUMAN_INPUT: RunEngine._ask_human,
    RunKind.WORKSTREAM: RunEngine._run_workstream,
    RunKind.MAP: RunEngine._run_map,
}
"""How a run runs a node, by its type's ``NodeTypeSpec.runs``."""


def _is_run_cancel(exc: BaseException) -> bool:
    """Whether ``exc`` is the run's cancel reaching the code that awaited.

    It arrives as CancelledError where the run waits on a condition, and as an
    ActivityError with a cancelled cause where it awaits one of its own activities
    (a notice, ``record_start``): the SDK turns the cancel of the awaiting task into
    that error. Runs recorded before ``CANCEL_IN_ACTIVITY_PATCH`` took the latter
    for an ordinary failure, and replay so.
    """
    if isinstance(exc, asyncio.CancelledError):
        return True
    return is_cancelled_exception(exc) and workflow.patched(CANCEL_IN_ACTIVITY_PATCH)
