"""Continue-as-new of a graph run: when, what it carries, and the history WARNING.

A run continues as new (same workflow id) at a node boundary when Temporal
suggests it or once its history reaches ``continue_as_new_after_events``; the
next generation receives ``CarriedState`` (docs/graphs/long-runs.md):
the scheduler, the run's record, the prompts that asked and wait, the nodes
activated but not started (``defer``), the notice counter, the workstreams, the
budget and the deadline. ``take_over`` is the other side of ``carried``.

Once per run (all generations), when a generation's history passes half of
Temporal's limit, a WARNING names its size (``watch_history``).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.runs import CarriedState, CarriedWait, GraphRunInput
    from spindle.worker.contracts import RunRef, policies
    from spindle.worker.workflows.agent_session import AgentSessions
    from spindle.worker.workflows.budget_meter import BudgetMeter
    from spindle.worker.workflows.edge_envelopes import EdgeEnvelopes
    from spindle.worker.workflows.human_input import HumanInput
    from spindle.worker.workflows.run_deadline import RunDeadline
    from spindle.worker.workflows.run_notices import RunNotices
    from spindle.worker.workflows.run_progress import RunProgress
    from spindle.worker.workflows.scheduler import Activation, GraphScheduler
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor


@dataclass
class CarriedParts:
    """The parts of a run that cross the boundary, each its own collaborator."""

    record: RunProgress
    scheduler: GraphScheduler
    prompts: HumanInput
    notices: RunNotices
    workstreams: WorkstreamSupervisor
    budget: BudgetMeter
    deadline: RunDeadline
    agents: AgentSessions
    envelopes: EdgeEnvelopes


class Handover:
    """One generation's handover to the next (see the module docstring).

    Args:
        run_input: the run's input (its thresholds; the next generation's input
            is this one with ``carried`` set).
        run: the run (generation 1's run id keys every generation's records).
        parts: what is carried.
    """

    def __init__(self, run_input: GraphRunInput, run: RunRef, parts: CarriedParts) -> None:
        self._input = run_input
        self._run = run
        self._parts = parts
        self.generation = 1
        self._history_warned = False
        self._history_warning: asyncio.Task[None] | None = None
        self.continuing = False
        """A boundary wanted to continue as new: nodes activated from now on are deferred."""
        self._deferred: list[Activation] = []

    def take_over(self, carried: CarriedState) -> None:
        """Continue where the previous generation stopped."""
        parts = self._parts
        self.generation = carried.generation
        parts.scheduler.restore(carried.scheduler)
        parts.record.restore(carried)
        parts.notices.count = carried.notices
        self._history_warned = carried.history_warned
        parts.prompts.restore(carried.waits, carried.prompts_asked)
        parts.workstreams.restore_counts(carried.workstream_counts)
        parts.workstreams.restore(carried.workstreams)
        if carried.envelopes is not None:  # None: carried before envelopes flowed
            parts.envelopes.restore(carried.envelopes)

    # -- history volume ---------------------------------------------------------------

    def _history_large(self) -> bool:
        info = workflow.info()
        limit = self._input.history_warning_events or policies.HISTORY_WARNING_EVENTS
        return (
            info.get_current_history_length() >= limit
            or info.get_current_history_size() >= policies.HISTORY_WARNING_BYTES
        )

    async def watch_history(self) -> None:
        """Warn once history is large (a task for the whole run: also while a long
        node, an agent's turns or a workstream, keeps it from a node boundary)."""
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
            self._parts.notices.warn(
                f"run history is large: {events} events, {size / 1_048_576:.1f} MB in this "
                f"generation (Temporal stops a run at 51,200 events or 50 MB); the run continues "
                "as new at node boundaries, but a long node (agent, workstream) may hold it"
            )
        )

    async def warning_posted(self) -> None:
        """Wait for the history WARNING to be posted, if one is under way."""
        if self._history_warning is not None:
            await self._history_warning

    # -- the boundary -----------------------------------------------------------------

    def wanted(self) -> bool:
        """History is long enough to continue as new (by the run's threshold or Temporal's)."""
        info = workflow.info()
        after = self._input.continue_as_new_after_events
        if after is not None and info.get_current_history_length() >= after:
            return True
        return info.is_continue_as_new_suggested()

    def defer(self, activation: Activation) -> None:
        """A node activated while continuing: the next generation starts it."""
        self._deferred.append(activation)

    async def drain(self) -> None:
        """Before handing over: updates accepted in this generation finish here, not
        half in the next one, and the history WARNING, if due, is said here (the
        next generation only knows that it was said)."""
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._parts.agents.posts.flushed()  # QUESTION/IDLE posts of this generation
        self._warn_history()
        await self.warning_posted()

    def call_off(self) -> list[Activation]:
        """Carry on in this generation after all; returns the deferred activations."""
        self.continuing = False
        deferred, self._deferred = self._deferred, []
        return deferred

    async def hand_over(self, stop_nodes: Callable[[], Awaitable[None]]) -> None:
        """Stop the nodes, then end this generation: a new run of the workflow (same
        id) starts from what it carries."""
        waits = self._parts.prompts.waits()  # before their tasks stop and forget them
        agents = self._parts.agents.carried()  # idle agents, their inboxes
        await stop_nodes()
        carried = self._carried(waits).model_copy(
            update={"agents": agents, "agent_posts": self._parts.agents.posts.count}
        )
        workflow.logger.info(
            "run %s continues as new (generation %d)", self._run.workflow_id, carried.generation
        )
        workflow.continue_as_new(self._input.model_copy(update={"carried": carried}))

    def _carried(self, waits: dict[str, CarriedWait]) -> CarriedState:
        parts = self._parts
        record = parts.record
        return CarriedState(
            generation=self.generation + 1,
            first_run_id=self._run.run_id,
            scheduler=parts.scheduler.snapshot(),
            state=record.state,
            output=record.output,
            output_node_ran=record.output_node_ran,
            ready=[(a.node_id, a.visit) for a in self._deferred],
            waits=waits,
            reports=list(record.reports),
            report_counts=record.report_counts,
            decided=list(record.decided.values()),
            notices=parts.notices.count,
            history_warned=self._history_warned,
            workstream_counts=parts.workstreams.counts,
            workstreams=parts.workstreams.carried(),
            budget=parts.budget.carry() if parts.budget.shown else None,
            deadline_at=parts.deadline.iso,
            prompts_asked=parts.prompts.asked,
            envelopes=parts.envelopes.carried(),
        )
