"""A child workstream's signals to its parent: progress, in order, off the step path,
and at its end ``WorkstreamEnded`` (``tell_parent_ended``).

Each step start (and each phase change) queues one ``Progress``; a background
task sends them one signal at a time, so a step never waits for the parent. A
parent that has ended (or never existed) fails the signal: that is logged once
and later progress is dropped.

A progress queued with ``settle`` is held that long first and dropped if newer
progress comes meanwhile (each is a whole snapshot: phase, iteration, cumulative
usage). An interactive child's reply to a message is usually over well within
it, so its "planning" and "blocked again" cost the parent one signal, not two:
each signal is a workflow task of the parent and one of the child (issue 17).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.workstreams import (
        WORKSTREAM_ENDED_SIGNAL,
        WORKSTREAM_PROGRESS_SIGNAL,
        WORKSTREAMS_CARRIED_PATCH,
        Progress,
        WorkstreamOutcome,
    )

# A cancel never cancels a signal to the parent in flight. temporalio 1.35 answers
# the cancel of a task whose signal was resolved in the same activation (the
# parent gone, the child cancelled: a terminated run) with a cancel command Core
# rejects as nondeterminism, and the child's workflow task then fails for good
# (docs/workstreams.md#ends-and-cancels).
SIGNALS_FINISH_PATCH = "workstream-signals-finish-before-cancel"


class ProgressSender:
    """Queue of progress for one parent; ``run`` is the sending task (workflow code)."""

    def __init__(self, parent_workflow_id: str) -> None:
        self.parent_workflow_id = parent_workflow_id
        self._queue: list[tuple[Progress, timedelta | None]] = []
        self._sending = False
        self._stopping = False
        self.parent_gone = False

    def stop(self) -> None:
        """End ``run`` at its next wait; a signal in flight is sent to its end first
        (see ``signal_to_its_end`` for why the task is not cancelled)."""
        self._stopping = True

    def send(self, progress: Progress, *, settle: timedelta | None = None) -> None:
        """Queue ``progress`` (returns at once); with ``settle``, send it only if
        nothing newer is queued within that time."""
        if not self.parent_gone:
            self._queue.append((progress, settle))

    async def run(self) -> None:
        """Send queued progress until ``stop``."""
        parent = workflow.get_external_workflow_handle(self.parent_workflow_id)
        while True:
            await workflow.wait_condition(lambda: bool(self._queue) or self._stopping)
            if self._stopping:
                return
            progress, settle = self._queue.pop(0)
            if self.parent_gone:
                continue
            self._sending = True
            try:
                if settle is not None and not self._queue:
                    # A durable timer, cancelled (no workflow task) when newer comes first.
                    with contextlib.suppress(TimeoutError):
                        await workflow.wait_condition(
                            lambda: bool(self._queue) or self._stopping, timeout=settle
                        )
                if settle is not None and (self._queue or self._stopping):
                    continue  # superseded, or stopped
                await parent.signal(WORKSTREAM_PROGRESS_SIGNAL, progress)
            except FailureError as exc:
                self.parent_gone = True
                self._queue.clear()
                workflow.logger.info(
                    "workstream %s: parent %s gone: %s",
                    progress.launch_id,
                    self.parent_workflow_id,
                    exc,
                )
            finally:
                self._sending = False

    async def flushed(self) -> None:
        """Wait until everything queued so far has been sent (or dropped, or left
        behind by ``stop``)."""
        await workflow.wait_condition(
            lambda: (not self._queue or self._stopping) and not self._sending
        )


async def signal_to_its_end(
    handle: workflow.ExternalWorkflowHandle[Any], name: str, arg: BaseModel
) -> None:
    """Signal ``handle``; a cancel of the caller meanwhile is raised once the signal
    has ended, and never cancels the signal itself.

    temporalio 1.35 turns the cancel of a task awaiting a signal that was resolved
    in the same activation into a cancel command Core rejects ("Invalid transition
    in state machine"): the workflow task then fails on every attempt.

    Raises:
        FailureError: the signal failed (the target is gone).
        asyncio.CancelledError: the caller was cancelled meanwhile.
    """
    sending = asyncio.create_task(handle.signal(name, arg))
    try:
        await asyncio.shield(sending)
    except asyncio.CancelledError:
        await asyncio.wait([sending])
        if not sending.cancelled():
            sending.exception()  # retrieved: the cancel is what the caller meets
        raise


async def tell_parent_ended(parent_workflow_id: str, outcome: WorkstreamOutcome) -> None:
    """Signal ``WorkstreamEnded`` to the parent's workflow id: the parent generation
    that took this child over (continue-as-new) has no handle to await. A parent
    that is gone is logged, not raised."""
    if not workflow.patched(WORKSTREAMS_CARRIED_PATCH):
        return  # recorded before the signal existed
    parent = workflow.get_external_workflow_handle(parent_workflow_id)
    try:
        if workflow.patched(SIGNALS_FINISH_PATCH):
            await signal_to_its_end(parent, WORKSTREAM_ENDED_SIGNAL, outcome)
        else:
            await parent.signal(WORKSTREAM_ENDED_SIGNAL, outcome)
    except FailureError as exc:
        workflow.logger.info("workstream %s: parent gone: %s", outcome.launch_id, exc)
