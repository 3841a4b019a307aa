"""Workflows that meet a cancel in the same workflow task as the failure of their
signal to a workflow that is gone, and the worker-side gate that makes the two meet.

The gate holds the first activation that resolves a signal until the test has
requested the cancel, then fails that workflow task: its next attempt carries both
the signal's failure and the cancel, as a terminated run's workstream child meets
them (docs/workstreams.md#ends-and-cancels).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from temporalio import workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.exceptions import FailureError
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.workstreams import (
        WORKSTREAM_ENDED_SIGNAL,
        Progress,
        WorkstreamOutcome,
        WorkstreamPhase,
        WorkstreamState,
    )
    from spindle.worker.workflows.workstreams.child_progress import (
        ProgressSender,
        signal_to_its_end,
    )

GONE = "no-such-parent"
"""The parent the workflows signal: never started, so every signal to it fails."""


@workflow.defn(name="TestProgressUnderCancel", sandboxed=True)
class ProgressUnderCancel:
    """Sends one progress to a gone parent and waits; cancelled, stops its sender as
    the child does (``ProgressSender.stop``). ``mode`` is unused: one signature for
    both workflows of the gate."""

    @workflow.run
    async def run(self, mode: str) -> str:
        sender = ProgressSender(GONE)
        sending = asyncio.create_task(sender.run())
        sender.send(Progress(launch_id="ws-1", phase=WorkstreamPhase.PLANNING))
        try:
            await workflow.wait_condition(lambda: False)
        except asyncio.CancelledError:
            sender.stop()
            await workflow.wait_condition(sending.done)
        return f"stopped; parent gone: {sender.parent_gone}"


@workflow.defn(name="TestEndSignalUnderCancel", sandboxed=True)
class EndSignalUnderCancel:
    """Tells a gone parent it ended, as the child does (``through``:
    ``signal_to_its_end``; ``plain``: the handle's own signal)."""

    @workflow.run
    async def run(self, mode: str) -> str:
        parent = workflow.get_external_workflow_handle(GONE)
        ended = WorkstreamOutcome(launch_id="ws-1", state=WorkstreamState.COMPLETED)
        try:
            if mode == "through":
                await signal_to_its_end(parent, WORKSTREAM_ENDED_SIGNAL, ended)
            else:
                await parent.signal(WORKSTREAM_ENDED_SIGNAL, ended)
        except FailureError as exc:  # the parent is gone
            return f"signal failed: {type(exc).__name__}"
        return "signalled"


class CancelGate:
    """Holds the first activation that resolves a signal until ``cancel_sent`` is set,
    then fails its workflow task (the next attempt carries the cancel too)."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.cancel_sent = threading.Event()
        self._done = False

    def stops(self, act: WorkflowActivation) -> bool:
        if self._done or act.is_replaying:
            return False
        return any(job.HasField("resolve_signal_external_workflow") for job in act.jobs)

    def hold(self) -> None:
        self._done = True
        self.held.set()
        # Within the SDK's deadlock timeout (2 s): the test cancels at once.
        self.cancel_sent.wait(1.5)
        raise RuntimeError("held until the cancel was requested (test gate)")


class GatedRunner(WorkflowRunner):
    """A runner whose instances pass each activation through ``gate``."""

    def __init__(self, inner: WorkflowRunner, gate: CancelGate) -> None:
        self.inner = inner
        self.gate = gate

    def prepare_workflow(self, defn: workflow._Definition) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _GatedInstance(self.inner.create_instance(det), self.gate)


class _GatedInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, gate: CancelGate) -> None:
        self.inner = inner
        self.gate = gate

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        if self.gate.stops(act):
            self.gate.hold()
        return self.inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        return self.inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        return self.inner.get_external_store_context(command_info)

    def get_info(self) -> workflow.Info:
        return self.inner.get_info()

    def get_thread_id(self) -> int | None:
        return self.inner.get_thread_id()
