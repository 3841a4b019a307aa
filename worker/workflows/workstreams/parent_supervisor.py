"""The parent side of workstreams (seed 002, docs/design.md §5): launch, steer, list, close.

``GraphRun`` owns one ``WorkstreamSupervisor``. Its updates, signal and query
(``spindle.worker.workflows.workstreams.parent_handlers``), ``workstream`` nodes and the
agents' workstream tools (``spindle.worker.workflows.workstreams.parent_tools``) all call the
methods here; the ``check_*`` methods are what the update validators run, so
a refused request leaves no trace in the run's history. Each launch gets a
``SupervisedChild`` (``parent_supervised_child``, its data a ``ChildRecord``) whose own task
starts the child, runs its deadline timeline and settles its end.

Across continue-as-new (docs/graphs/long-runs.md): a generation may hand over
while children run (``portable``); ``carried`` is what it hands over and
``restore`` + ``resume_adopted`` take it on in the next generation, where each
running child's end arrives as its ``WorkstreamEnded`` signal (``ended``).

Ids are counted per parent run: launches ``ws-<n>``, steers ``s-<n>``,
messages ``m-<n>``. A run that launches nothing schedules no command from here,
so histories recorded before workstreams replay unchanged.
"""

from __future__ import annotations

import asyncio
import math
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import DeadlineAck, ExtendWorkstreamDeadline
    from spindle.shared.contracts.errors import (
        Conflict,
        DeadlineRefused,
        RunFinishing,
        SpindleError,
        UnknownWorkstream,
        WorkstreamFinished,
        WorkstreamNotInteractive,
        WorkstreamStartFailed,
        to_application_error,
    )
    from spindle.shared.contracts.workstreams import (
        CHILD_MESSAGE_SIGNAL,
        CHILD_STEER_SIGNAL,
        CarriedWorkstream,
        ChildMessage,
        LaunchAck,
        LaunchRequest,
        MessageWorkstream,
        Progress,
        SteerAck,
        SteerDirective,
        SteerWorkstream,
        TerminateAck,
        TerminateWorkstream,
        WorkstreamList,
        WorkstreamMessageAck,
        WorkstreamOutcome,
        WorkstreamState,
        child_workflow_id,
    )
    from spindle.worker.contracts import NodeExecution, NodeOutcome, RunRef
    from spindle.worker.workflows.workstreams.parent_budget_holds import BudgetHolds
    from spindle.worker.workflows.workstreams.parent_child_record import StopReason
    from spindle.worker.workflows.workstreams.parent_node import run_workstream_node
    from spindle.worker.workflows.workstreams.parent_reports import ChildReports
    from spindle.worker.workflows.workstreams.parent_supervised_child import SupervisedChild

if TYPE_CHECKING:
    from spindle.worker.workflows.budget_meter import BudgetMeter

SteerOrigin = Literal["user", "agent"]

#: Live workstreams per run when the run's input names no limit (runs started
#: before the limit existed); the same as the ``max_live_workstreams`` default.
DEFAULT_MAX_LIVE_WORKSTREAMS = 32

#: Ended workstreams a generation hands to the next (the latest ones): what it
#: carries stays bounded however many children a long run launched.
ENDED_WORKSTREAMS_CARRIED = 100

#: Ended workstreams whose report their launching agent has not yet taken that a
#: generation hands to the next, besides the latest ended ones (the newest kept).
UNHEARD_REPORTS_CARRIED = 100

#: A message to a running child is answered (202) as soon as the parent has taken
#: it, not after the signal's delivery (``SupervisedChild.hand_over``).
MESSAGE_HANDOVER_PATCH = "workstream-message-handover"


def _refusal(error: SpindleError) -> ApplicationError:
    return to_application_error(error)


class WorkstreamSupervisor:
    """The workstreams of one parent run (workflow code: deterministic, no I/O).

    Args:
        run: the parent run; its messages go to its stream as ``main``.
        user_id: who started the parent (passed on to its children).
        max_live: workstreams that may run at once (from the run's input, so a
            replay sees the limit the run started with).
        meter: the run's budget: children's spend counts against it, and a
            child's own budget is reserved from its remainder.
        deadline_at: the run's deadline; a child's deadline never passes it.

    Attributes:
        reports: what the agents that launched children hear of their ends
            (``ChildReports``: ``take``, ``has``, ``awaited``, ``wait``;
            docs/workstreams.md).
    """

    def __init__(
        self,
        run: RunRef,
        *,
        user_id: str | None,
        max_live: int | None = None,
        meter: BudgetMeter | None = None,
        deadline_at: datetime | None = None,
    ) -> None:
        self._run = run
        self._user_id = user_id
        self._max_live = max_live or DEFAULT_MAX_LIVE_WORKSTREAMS
        self._meter = meter
        self._deadline_at = deadline_at
        self._children: dict[str, SupervisedChild] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # Held until done (a task nothing references may be collected), then let go:
        # one per message, which a long conversation sends without end.
        self._deliveries: set[asyncio.Task[None]] = set()
        self._counts = {"ws": 0, "s": 0, "m": 0}
        self._closing = False
        self.reports = ChildReports(self._children)
        # A run held at its budget holds its running children (docs/graphs/budgets.md).
        self._holds = (
            BudgetHolds(meter, self._children, lambda: self._next_id("s"))
            if meter is not None
            else None
        )

    @property
    def settled(self) -> bool:
        """No child is running (a run may then continue as new without them)."""
        return all(c.settled for c in self._children.values())

    @property
    def counts(self) -> dict[str, int]:
        """Ids handed out so far, by prefix; a continued run goes on from them."""
        return dict(self._counts)

    def restore_counts(self, counts: dict[str, int]) -> None:
        """Carry on numbering launches where the previous generation stopped."""
        self._counts.update({k: v for k, v in counts.items() if k in self._counts})

    # -- continue-as-new ------------------------------------------------------------------

    def may_hand_over(self) -> bool:
        """The run may continue as new now, as far as its children go: each one settled
        or ``portable`` (started ABANDON, i.e. launched with
        ``WORKSTREAMS_CARRIED_PATCH``: a child a run launched before it would be
        cancelled by the handover)."""
        return all(c.portable for c in self._children.values())

    def carried(self) -> list[CarriedWorkstream]:
        """The children to hand over: every live one, the latest ended ones."""
        children = list(self._children.values())
        ended = [c.launch_id for c in children if c.settled][-ENDED_WORKSTREAMS_CARRIED:]
        # Reports their agents have not heard yet cross too (the newest, bounded).
        ids = self.reports.unheard_ids()
        unheard = [c for c in self._children if c in ids]
        kept = set(ended) | set(unheard[-UNHEARD_REPORTS_CARRIED:])
        return [c.carried() for c in children if not c.settled or c.launch_id in kept]

    def restore(self, carried: list[CarriedWorkstream]) -> None:
        """Take over the previous generation's children (in ``__init__``, so their
        signals find them); ``resume_adopted`` then supervises the live ones."""
        for record in carried:
            self._children[record.launch_id] = SupervisedChild.adopt(
                record,
                parent=self._run,
                user_id=self._user_id,
                next_steer_id=lambda: self._next_id("s"),
            )
        self.reports.restored()

    def resume_adopted(self) -> None:
        """Supervise the adopted children that had not settled (once, at the run's start)."""
        for child in self._children.values():
            if child.adopted and not child.settled:
                self._tasks.append(asyncio.create_task(self._resume(child)))
        if not self.settled and self._holds is not None:
            self._holds.follow()

    async def _resume(self, child: SupervisedChild) -> None:
        await child.resume()
        self.reports.settled(child)

    def ended(self, outcome: WorkstreamOutcome) -> None:
        """A child's ``WorkstreamEnded`` signal (an unknown launch id is ignored)."""
        child = self._children.get(outcome.launch_id)
        if child is not None:
            child.report(outcome)

    def _next_id(self, prefix: str) -> str:
        self._counts[prefix] += 1
        return f"{prefix}-{self._counts[prefix]}"

    # -- checks: the update validators (and the tools) refuse with these --------------

    def check_launch(self) -> None:
        """Raises ``RunFinishing`` once the run is ending, ``Conflict`` at the live limit.

        A refusal reaches the agent's tool or the update's caller; the run goes on.
        """
        if self._closing:
            raise _refusal(RunFinishing("the run is finishing: it launches no more workstreams"))
        live = sum(1 for child in self._children.values() if not child.state.finished)
        if live >= self._max_live:
            raise _refusal(
                Conflict(
                    f"the run already has {live} live workstreams, its maximum "
                    "(max_live_workstreams): wait for one to end, or close one, then launch",
                    context={"live": live, "max_live_workstreams": self._max_live},
                )
            )

    def check_not_held(self) -> None:
        """Raises ``BudgetRefused`` naming the cap while the run's budget holds its
        workstreams (``BudgetHolds.check_not_held``)."""
        if self._holds is not None:
            self._holds.check_not_held()

    def check_budget(self, request: LaunchRequest) -> None:
        """Raises ``BudgetRefused`` when the child's own budget exceeds the run's remainder."""
        if self._meter is not None and request.budget is not None:
            self._meter.check_reserve(request.budget)

    def _deadline_for(self, request: LaunchRequest) -> int:
        """The child's deadline: its own, or the run's remaining time if that is sooner."""
        if self._deadline_at is None:
            return request.deadline_seconds
        left = (self._deadline_at - workflow.now()).total_seconds()
        return max(1, min(request.deadline_seconds, math.floor(left)))

    def check_extend(self, request: ExtendWorkstreamDeadline) -> SupervisedChild:
        """A running, non-interactive child whose extended deadline stays within the run's.

        Raises ``UnknownWorkstream``, ``WorkstreamFinished``, ``Conflict`` (an
        interactive workstream has no deadline) or ``DeadlineRefused``.
        """
        # Known, then the request itself (interactive, past the run's), then the state.
        child = self.known(request.launch_id)
        if child.request.interactive:
            raise _refusal(
                Conflict(
                    f"workstream '{child.launch_id}' is interactive: it has no deadline",
                    context={"launch_id": child.launch_id},
                )
            )
        extended = child.deadline_seconds + request.extension.extend_seconds
        ends = child.started_at + timedelta(seconds=extended)
        if self._deadline_at is not None and ends > self._deadline_at:
            left = max(0, math.floor((self._deadline_at - child.started_at).total_seconds()))
            raise _refusal(
                DeadlineRefused(
                    f"workstream '{child.launch_id}' cannot run past the run's own deadline: "
                    f"at most {left - child.deadline_seconds} s more",
                    context={
                        "launch_id": child.launch_id,
                        "deadline_seconds": child.deadline_seconds,
                        "max_deadline_seconds": left,
                    },
                )
            )
        return self.check_running(request.launch_id)

    def extend(self, request: ExtendWorkstreamDeadline) -> DeadlineAck:
        """Extend a child's deadline (its timeline re-arms from the new end)."""
        child = self.check_extend(request)
        child.extend(request.extension.extend_seconds)
        ends = child.started_at + timedelta(seconds=child.deadline_seconds)
        return DeadlineAck(
            launch_id=child.launch_id,
            deadline_seconds=child.deadline_seconds,
            deadline_at=ends.isoformat(),
        )

    def known(self, launch_id: str) -> SupervisedChild:
        """The workstream ``launch_id``; raises ``UnknownWorkstream``."""
        child = self._children.get(launch_id)
        if child is None:
            raise _refusal(
                UnknownWorkstream(
                    f"unknown workstream '{launch_id}'",
                    context={"launch_id": launch_id, "known": list(self._children)},
                )
            )
        return child

    def check_running(self, launch_id: str) -> SupervisedChild:
        """A running workstream; raises ``UnknownWorkstream`` or ``WorkstreamFinished``
        (also while it is ``canceling``)."""
        child = self.known(launch_id)
        if child.state is not WorkstreamState.RUNNING:
            raise self._finished(child)
        return child

    def check_interactive(self, launch_id: str) -> SupervisedChild:
        """A running interactive workstream; else as ``check_running``, or
        ``WorkstreamNotInteractive``."""
        child = self.check_running(launch_id)
        if not child.request.interactive:
            raise _refusal(
                WorkstreamNotInteractive(
                    f"workstream '{launch_id}' is not interactive",
                    context={"launch_id": launch_id},
                )
            )
        return child

    def check_terminate(self, launch_id: str) -> SupervisedChild:
        """A workstream that has not ended (running or canceling); else raises."""
        child = self.known(launch_id)
        if child.state.finished:
            raise self._finished(child)
        return child

    @staticmethod
    def _finished(child: SupervisedChild) -> ApplicationError:
        return _refusal(
            WorkstreamFinished(
                f"workstream '{child.launch_id}' is {child.state.value}",
                context={"launch_id": child.launch_id, "state": child.state.value},
            )
        )

    # -- operations -------------------------------------------------------------------

    async def launch(
        self, request: LaunchRequest, *, launched_by: str | None = None, wait: bool = True
    ) -> LaunchAck:
        """Start a child; returns once it has started (never waits for its end).

        Args:
            request: what to launch.
            launched_by: the agent node launching it with its tool: that agent hears
                its end (``reports.take``).
            wait: that agent, once it has answered, waits for it (``reports.awaited``).

        Raises:
            ApplicationError: ``RunFinishing``; ``WorkstreamStartFailed`` when
                Temporal refused to start the child.
        """
        self.check_launch()
        self.check_budget(request)
        launch_id = self._next_id("ws")
        if self._meter is not None and request.budget is not None:
            self._meter.reserve(launch_id, request.budget)
        child = SupervisedChild(
            launch_id=launch_id,
            request=request,
            child_id=child_workflow_id(self._run.workflow_id, launch_id),
            started_at=workflow.now(),
            parent=self._run,
            user_id=self._user_id,
            next_steer_id=lambda: self._next_id("s"),
            deadline_seconds=self._deadline_for(request),
            launched_by=launched_by,
            wait=wait,
        )
        self._children[launch_id] = child
        # A task of its own: the caller (an update, an agent node) may be
        # cancelled; the child's supervision goes on.
        self._tasks.append(asyncio.create_task(self._supervise(child)))
        if self._holds is not None:
            self._holds.follow()
        await workflow.wait_condition(lambda: child.handle is not None or child.settled)
        if child.handle is None:
            child.heard = True  # the caller is told here: no report of it besides
            error = child.outcome.error if child.outcome else None
            raise _refusal(
                WorkstreamStartFailed(f"workstream '{launch_id}' did not start: {error}")
            )
        deadline_at = child.started_at + timedelta(seconds=child.deadline_seconds)
        return LaunchAck(
            launch_id=launch_id,
            workstream_id=launch_id,
            child_workflow_id=child.child_id,
            deadline_seconds=child.deadline_seconds,
            deadline_at=deadline_at.isoformat(),
        )

    async def _supervise(self, child: SupervisedChild) -> None:
        await child.run()
        self.reports.settled(child)
        if self._meter is not None:
            # Its last word on spend, then its reservation goes back to the run.
            if child.outcome is not None and child.outcome.usage is not None:
                self._meter.child_used(child.launch_id, child.outcome.usage)
            self._meter.child_ended(child.launch_id)

    async def steer(self, request: SteerWorkstream, *, origin: SteerOrigin = "user") -> SteerAck:
        """Send a steering directive ``s-<n>`` to a running child."""
        child = self.check_running(request.launch_id)
        steer_id = self._next_id("s")
        directive = SteerDirective(
            steer_id=steer_id, command=request.steer.command, text=request.steer.text, origin=origin
        )
        await self._deliver(child, CHILD_STEER_SIGNAL, directive)
        return SteerAck(steer_id=steer_id, launch_id=child.launch_id, command=request.steer.command)

    async def message(self, request: MessageWorkstream) -> WorkstreamMessageAck:
        """Send a follow-up message ``m-<n>`` to a running interactive child."""
        child = self.check_interactive(request.launch_id)
        message_id = self._next_id("m")
        message = ChildMessage(message_id=message_id, text=request.message.message)
        if child.started and workflow.patched(MESSAGE_HANDOVER_PATCH):
            # Answered in this workflow task: waiting for the signal's delivery would
            # cost the caller a second workflow task of this run (issue 17). The
            # validator has checked the child runs; if it ends before the signal
            # lands, the message is refused on the stream (``hand_over``).
            delivery = asyncio.create_task(child.hand_over(message, child.take_turn()))
            self._deliveries.add(delivery)
            delivery.add_done_callback(self._deliveries.discard)
            return WorkstreamMessageAck(launch_id=child.launch_id, message_id=message_id)
        await self._deliver(child, CHILD_MESSAGE_SIGNAL, message)
        return WorkstreamMessageAck(launch_id=child.launch_id, message_id=message_id)

    async def terminate(self, request: TerminateWorkstream) -> TerminateAck:
        """Stop a child gracefully (forced after the grace period); it ends ``canceled``."""
        child = self.check_terminate(request.launch_id)
        await child.stop("terminate")
        return TerminateAck(launch_id=child.launch_id, state=child.state)

    def progress(self, progress: Progress) -> None:
        """A child's progress signal (an unknown launch id is ignored)."""
        child = self._children.get(progress.launch_id)
        if child is not None:
            child.progress(progress)
        if self._meter is not None and progress.usage is not None:
            # Counted even for a child this generation does not know (launched by an
            # earlier one): signals reach the run by workflow id.
            self._meter.child_used(progress.launch_id, progress.usage)

    def describe(self) -> WorkstreamList:
        """Every workstream of the run, in launch order.

        Elapsed time runs to ``workflow.now()``: in a query, the time of the
        run's latest workflow task (a progress signal, a deadline step), so a
        caller wanting the wall-clock figure of a running workstream computes
        it from ``started_at``.
        """
        now = workflow.now()
        return WorkstreamList(workstreams=[c.info(now) for c in self._children.values()])

    async def run_node(self, execution: NodeExecution) -> NodeOutcome:
        """A ``workstream`` node (``parent_node.run_workstream_node``)."""
        return await run_workstream_node(self, execution)

    async def close(self, reason: StopReason, *, stop_all: bool) -> None:
        """Before the run ends: refuse launches, stop children, wait until all settled.

        Args:
            reason: what the stopped children are told.
            stop_all: stop every child (the run failed or is cancelled); else
                only interactive ones, while the others run to their end
                (bounded by their deadlines).
        """
        self._closing = True
        if not self._children:
            return
        children = list(self._children.values())
        await workflow.wait_condition(lambda: all(c.started or c.settled for c in children))
        for child in children:
            if stop_all or child.request.interactive:
                await child.stop(reason)
        await workflow.wait_condition(
            lambda: all(c.settled and c.deliveries_done for c in children)
        )

    async def _deliver(self, child: SupervisedChild, name: str, arg: Any) -> None:
        if not await child.signal(name, arg):
            raise _refusal(
                WorkstreamFinished(
                    f"workstream '{child.launch_id}' has ended",
                    context={"launch_id": child.launch_id},
                )
            )
