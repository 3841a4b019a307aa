"""What a child workstream posts on its parent's stream, and its finish activity.

Every message goes to the parent's stream with ``workstream_id = launch_id``:
acknowledgements of steers and follow-up messages (applied at a step, or
rejected with why), notices (a failed exchange, no final answer), and at the
end ``finish_workstream``, which stores ``out/result.md`` and posts COMPLETE
(docs/workstreams.md). Acks and notices are best effort: a failure to post is
logged, the child's cancel is not swallowed.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.messages import AgentMessageType
    from spindle.shared.contracts.workstreams import ChildMessage, WorkstreamState
    from spindle.worker.contracts import (
        FINISH_WORKSTREAM,
        POST_MESSAGE,
        RunNotice,
        RunRef,
        WorkstreamFinish,
        WorkstreamFinished,
        policies,
    )
    from spindle.worker.workflows.workstreams.child_steering import SteerOutcome

# Follow-up messages are acknowledged on the stream (docs/workstreams.md).
MESSAGE_ACK_PATCH = "workstream-message-acks"
# The child's own notices (acks, warnings) are posted by a local activity: one
# Redis post does not need an activity task and a workflow task of its own, and
# an ack sits on every follow-up message's path to its answer (issue 17).
LOCAL_POSTS_PATCH = "workstream-local-posts"


class ChildPosts:
    """The child's posts (see the module docstring); ids ``ack.<n>.<steer id>``,
    ``ack.<message id>``, ``notice.<n>`` and ``finish``.

    Args:
        run_ref: the child's run as its activities see it.
        launch_id: the child's launch id (for logs).
    """

    def __init__(self, run_ref: Callable[[], RunRef], launch_id: str) -> None:
        self._run_ref = run_ref
        self._launch_id = launch_id
        self._acks = 0

    async def acknowledge(self, outcomes: list[SteerOutcome]) -> None:
        """Acknowledge steers: applied at a step, or rejected."""
        run = self._run_ref()
        for outcome in outcomes:
            self._acks += 1
            await self._post(outcome.notice(run), f"ack.{self._acks}.{outcome.directive.steer_id}")

    async def acknowledge_message(
        self, message: ChildMessage, step: int, rejected: str | None = None
    ) -> None:
        """Acknowledge a follow-up message as a steer is: applied at the step that
        first runs with it (or rejected, with why). Runs recorded before messages
        were acknowledged replay without it."""
        if not workflow.patched(MESSAGE_ACK_PATCH):
            return
        status = "rejected" if rejected else "applied"
        text = f"message {message.message_id} {status} at step {step}"
        notice = RunNotice(
            run=self._run_ref(),
            type=int(AgentMessageType.SYSTEM),
            text=f"{text}: {rejected}" if rejected else text,
            details={
                "message_id": message.message_id,
                "status": status,
                "applied_at_step": step,
                "reason": rejected,
            },
        )
        await self._post(notice, f"ack.{message.message_id}")

    async def notice(self, kind: AgentMessageType, text: str) -> None:
        """Post a notice (an ERROR or WARNING of the child)."""
        self._acks += 1
        await self._post(
            RunNotice(run=self._run_ref(), type=int(kind), text=text), f"notice.{self._acks}"
        )

    async def _post(self, notice: RunNotice, activity_id: str) -> None:
        try:
            if workflow.patched(LOCAL_POSTS_PATCH):
                # Same dedup keys as the remote form (run, activity id, index): a
                # local attempt repeated after a lost workflow task posts nothing twice.
                await workflow.execute_local_activity(
                    POST_MESSAGE,
                    notice,
                    activity_id=activity_id,
                    start_to_close_timeout=policies.LOCAL_ACTIVITY_START_TO_CLOSE,
                    retry_policy=policies.NOTICE_RETRY,
                )
                return
            await workflow.execute_activity(
                POST_MESSAGE,
                notice,
                activity_id=activity_id,
                start_to_close_timeout=policies.LIFECYCLE_START_TO_CLOSE,
                retry_policy=policies.NOTICE_RETRY,
            )
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            workflow.logger.warning("cannot post %r: %s", notice.text, exc)

    async def finish(
        self,
        state: WorkstreamState,
        answer: str | None,
        error: str | None,
        *,
        iterations: int,
        user_id: str | None,
    ) -> WorkstreamFinished:
        """``finish_workstream``: the result stored and COMPLETE posted; what it stored
        (nothing if it failed for good: the child still ends).

        Raises:
            ActivityError: the child's cancel reached it.
        """
        try:
            finished: WorkstreamFinished = await workflow.execute_activity(
                FINISH_WORKSTREAM,
                WorkstreamFinish(
                    run=self._run_ref(),
                    state=state.value,
                    answer=answer,
                    error=error,
                    iterations=iterations,
                    user_id=user_id,
                ),
                result_type=WorkstreamFinished,
                activity_id="finish",
                start_to_close_timeout=policies.WORKSTREAM_FINISH_START_TO_CLOSE,
                retry_policy=policies.WORKSTREAM_FINISH_RETRY,
            )
        except ActivityError as exc:
            if is_cancelled_exception(exc):
                raise
            workflow.logger.warning("workstream %s: cannot finish: %s", self._launch_id, exc)
            return WorkstreamFinished()
        return finished
