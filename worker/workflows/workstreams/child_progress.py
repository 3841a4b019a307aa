"""A child workstream's progress signals to its parent, in order, off the step path.

Each step start (and each phase change) queues one ``Progress``; a background
task sends them one signal at a time, so a step never waits for the parent. A
parent that has ended (or never existed) fails the signal: that is logged once
and later progress is dropped.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.workstreams import WORKSTREAM_PROGRESS_SIGNAL, Progress


class ProgressSender:
    """Queue of progress for one parent; ``run`` is the sending task (workflow code)."""

    def __init__(self, parent_workflow_id: str) -> None:
        self.parent_workflow_id = parent_workflow_id
        self._queue: list[Progress] = []
        self._sending = False
        self.parent_gone = False

    def send(self, progress: Progress) -> None:
        """Queue ``progress`` (returns at once)."""
        if not self.parent_gone:
            self._queue.append(progress)

    async def run(self) -> None:
        """Send queued progress forever (cancel the task to end it)."""
        parent = workflow.get_external_workflow_handle(self.parent_workflow_id)
        while True:
            await workflow.wait_condition(lambda: bool(self._queue))
            progress = self._queue.pop(0)
            if self.parent_gone:
                continue
            self._sending = True
            try:
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
        """Wait until everything queued so far has been sent (or dropped)."""
        await workflow.wait_condition(lambda: not self._queue and not self._sending)
