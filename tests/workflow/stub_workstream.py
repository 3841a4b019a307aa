"""A stand-in ``Workstream`` child for the parent's tests: scripted by its task.

The first word of the task picks the behaviour:

- ``slow``: reports progress, then waits; on ``Stop`` it returns its partial
  result with ``timeout`` (reason timeout) or ``canceled`` (other reasons);
- ``stubborn``: reports progress and ignores ``Stop``; only a cancel ends it;
- ``fail``: fails with an ``ApplicationError``;
- anything else: completes at once with ``done: <task>``.

An interactive child answers each ``Message`` with a progress signal and ends
on ``Stop``. A stopped child tells its parent (``WorkstreamEnded``) as the real
child does: a parent generation that took it over learns its end that way.
Every signal it gets is logged with its workflow time (query ``stub_log``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.workstreams import (
        CHILD_MESSAGE_SIGNAL,
        CHILD_STEER_SIGNAL,
        CHILD_STOP_SIGNAL,
        WORKSTREAM_PROGRESS_SIGNAL,
        WORKSTREAM_WORKFLOW,
        ChildMessage,
        ChildStop,
        Progress,
        SteerDirective,
        WorkstreamInput,
        WorkstreamOutcome,
        WorkstreamPhase,
        WorkstreamState,
    )

with workflow.unsafe.imports_passed_through():
    from spindle.worker.workflows.workstreams.child_progress import tell_parent_ended

STUB_LOG_QUERY = "stub_log"
PARTIAL = "partial: two of three sources read"


class StubEvent(BaseModel):
    kind: str
    at: str
    detail: dict[str, object] = Field(default_factory=dict)


class StubLog(BaseModel):
    events: list[StubEvent] = Field(default_factory=list)


@workflow.defn(name=WORKSTREAM_WORKFLOW)
class StubWorkstream:
    @workflow.init
    def __init__(self, data: WorkstreamInput) -> None:
        self._data = data
        self._log = StubLog()
        self._stop: ChildStop | None = None
        self._inbox: list[ChildMessage] = []

    def _record(self, kind: str, **detail: object) -> None:
        self._log.events.append(
            StubEvent(kind=kind, at=workflow.now().isoformat(), detail=dict(detail))
        )

    @workflow.signal(name=CHILD_STEER_SIGNAL)
    def steer(self, directive: SteerDirective) -> None:
        self._record("steer", **directive.model_dump(mode="json"))

    @workflow.signal(name=CHILD_MESSAGE_SIGNAL)
    def message(self, message: ChildMessage) -> None:
        self._record("message", **message.model_dump(mode="json"))
        self._inbox.append(message)

    @workflow.signal(name=CHILD_STOP_SIGNAL)
    def stop(self, stop: ChildStop) -> None:
        self._record("stop", reason=stop.reason)
        if self._stop is None:
            self._stop = stop

    @workflow.query(name=STUB_LOG_QUERY)
    def log(self) -> StubLog:
        return self._log

    async def _progress(self, iteration: int, message: str) -> None:
        parent = workflow.get_external_workflow_handle(self._data.parent_workflow_id)
        try:
            await self._signal_progress(parent, iteration, message)
        except FailureError as exc:
            # As the real child: a parent between two generations (continue-as-new) may
            # be out of reach for a moment; progress is best effort.
            workflow.logger.info("progress %d not delivered: %s", iteration, exc)

    async def _signal_progress(
        self, parent: workflow.ExternalWorkflowHandle[Any], iteration: int, message: str
    ) -> None:
        await parent.signal(
            WORKSTREAM_PROGRESS_SIGNAL,
            Progress(
                launch_id=self._data.launch_id,
                phase=WorkstreamPhase.SYNTHESIZING,
                iteration=iteration,
                message=message,
            ),
        )

    @workflow.run
    async def run(self, data: WorkstreamInput) -> WorkstreamOutcome:
        word = data.launch.task.split()[0] if data.launch.task.split() else ""
        if data.launch.interactive:
            return await self._converse()
        if word == "fail":
            raise ApplicationError("the stub was told to fail", non_retryable=True)
        if word in ("slow", "stubborn"):
            await self._progress(1, PARTIAL)
            await workflow.wait_condition(lambda: self._stop is not None and word == "slow")
            outcome = self._ended(PARTIAL, iterations=1)
            await tell_parent_ended(self._data.parent_workflow_id, outcome)
            return outcome
        return WorkstreamOutcome(
            launch_id=data.launch_id,
            state=WorkstreamState.COMPLETED,
            summary=f"done: {data.launch.task}",
            iterations=1,
        )

    async def _converse(self) -> WorkstreamOutcome:
        answered = 0
        while True:
            await workflow.wait_condition(lambda: self._stop is not None or bool(self._inbox))
            if self._stop is not None:
                # As the real child: a parent generation that took it over learns its end
                # from this signal (it has no handle to await).
                outcome = self._ended(f"answered {answered} message(s)", iterations=answered)
                await tell_parent_ended(self._data.parent_workflow_id, outcome)
                return outcome
            message = self._inbox.pop(0)
            answered += 1
            await self._progress(answered, f"reply to {message.text}")

    def _ended(self, summary: str, *, iterations: int) -> WorkstreamOutcome:
        assert self._stop is not None
        timeout = self._stop.reason == "timeout"
        return WorkstreamOutcome(
            launch_id=self._data.launch_id,
            state=WorkstreamState.TIMEOUT if timeout else WorkstreamState.CANCELED,
            summary=summary,
            iterations=iterations,
        )
