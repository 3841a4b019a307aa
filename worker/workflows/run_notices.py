"""The run's WARNING notices on its stream, and how the run's cancel is recognised.

Graph warnings, budget holds and the history warning are posted by one
``post_message`` activity each, numbered ``notice.<n>`` over the whole run (the
counter is carried across continue-as-new, so ids never repeat).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.runs import CANCEL_IN_ACTIVITY_PATCH
    from spindle.worker.contracts import POST_MESSAGE, RunNotice, RunRef, policies


class RunNotices:
    """Posts the run's WARNINGs, best effort; ``count`` numbers them.

    Args:
        run: the run whose stream gets them.
    """

    def __init__(self, run: RunRef) -> None:
        self._run = run
        self.count = 0

    async def warn(self, text: str, details: dict[str, Any] | None = None) -> None:
        """Post a WARNING; a failure to post is logged, the run's cancel is raised.

        Raises:
            ActivityError: the run's cancel reached the notice (``is_run_cancel``).
        """
        self.count += 1
        workflow.logger.warning("run %s: %s", self._run.workflow_id, text)
        try:
            await workflow.execute_activity(
                POST_MESSAGE,
                RunNotice(
                    run=self._run, type=int(AgentMessageType.WARNING), text=text, details=details
                ),
                activity_id=f"notice.{self.count}",
                start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
                retry_policy=policies.NOTICE_RETRY,
            )
        except ActivityError as exc:
            # A notice is best effort, but the run's cancel is not: the SDK turns the
            # cancel of the task awaiting it into this error, and a run that went on
            # would wait forever for nodes that no longer come.
            if is_run_cancel(exc):
                raise
            workflow.logger.warning("cannot post warning %r: %s", text, exc)


def is_run_cancel(exc: BaseException) -> bool:
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
