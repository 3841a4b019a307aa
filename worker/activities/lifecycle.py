"""``finish_run``: the run's last messages and its final archive state."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform import metrics
from spindle.shared.store.prompts import PromptStore
from spindle.shared.store.run_trace import NodeFinished
from spindle.shared.tasks.webhooks import bounded_output
from spindle.worker.activities.hitl import kept_if_possible
from spindle.worker.activities.recorder import summarize
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.activities.run_webhooks import ended_data, notify_webhook, run_end
from spindle.worker.contracts import (
    FINISH_RUN,
    POST_MESSAGE,
    Empty,
    RunFinish,
    RunNotice,
)


class LifecycleActivities(RunActivities):
    """Run start/finish bookkeeping, with the bus, archive and settings injected.

    Args:
        settings: the worker's settings.
    """

    @activity.defn(name=FINISH_RUN)
    async def finish_run(self, finish: RunFinish) -> Empty:
        """Post the closing message(s) and record the outcome.

        completed → COMPLETE; failed → ERROR then COMPLETE; canceled (and other
        ends) → TERMINATED. Nothing can be posted to the stream afterwards.
        """
        poster = self._poster(finish.run)
        await poster.announce_retry("finishing the run")
        status = finish.status
        # Who or what ended a run that did not complete, and the reason in a sentence.
        error, ended_by = await run_end(self.bus, finish)
        if status == RunStatus.COMPLETED:
            await poster.post(
                AgentMessageType.COMPLETE,
                summarize(finish.output) or "Run completed",
                details={"status": status.value},
            )
        elif status == RunStatus.FAILED:
            error = finish.error or "the run failed"
            await poster.post(AgentMessageType.ERROR, error, details={"error": error})
            await poster.post(
                AgentMessageType.COMPLETE, "Run failed", details={"status": status.value}
            )
        else:
            await poster.post(
                AgentMessageType.TERMINATED,
                f"Run {status.value}" + (f": {error}" if error else ""),
                details={"status": status.value, **ended_data(error, ended_by)},
            )
        fields: dict[str, Any] = {
            "status": status.value,
            "output": finish.output,
            "error": error,
            "ended_by": ended_by.model_dump(mode="json") if ended_by is not None else None,
            "current_nodes": [],
            "pending_input": None,
        }
        if finish.budget is not None:
            fields["budget"] = finish.budget.model_dump(mode="json")
        if finish.generations is not None:  # a run recorded before these says nothing
            fields["generations"] = finish.generations
        if finish.node_counts is not None:
            fields["node_counts"] = finish.node_counts
        if self.archive is not None and finish.prompts_asked:
            # A finished run answers no prompt: out of every inbox.
            await kept_if_possible(
                PromptStore(self.archive.database).close_run(finish.run.workflow_id), "closed"
            )
        await poster.check_current()
        ticket = await self.recorder.archive_later(
            *_decided(finish),
            self.recorder.run_update(finish.run, **fields),
            poster.archive_op(),
        )
        # The nodes' archive writes went to the archiver; a run that has ended is
        # archived whole (MongoDB up), so wait for it here, once per run.
        await self.recorder.flushed(ticket)
        # Task runs: every task still active gets its end, the root the run's.
        if finish.tracks_tasks:
            await self.tasks.run_finished(finish.run, status=status.value, error=finish.error)
        outcome = {**_outcome(finish), **ended_data(error, ended_by)}
        await notify_webhook(self.bus, finish.run, status.value, outcome)
        # Last, so that a retried attempt that failed before here is not counted twice.
        metrics.run_finished(finish.run.workflow_id, status.value)
        return Empty()

    @activity.defn(name=POST_MESSAGE)
    async def post_message(self, notice: RunNotice) -> Empty:
        """Post a message the workflow itself has to say (e.g. a loop-bound WARNING)."""
        poster = self._poster(notice.run)
        await poster.post(AgentMessageType(notice.type), notice.text, details=notice.details)
        await poster.archive()
        return Empty()


def _decided(finish: RunFinish) -> list[NodeFinished]:
    """The reports the workflow made (skipped, reused, workstream nodes): no activity
    archived them (docs/graphs/long-runs.md#after-the-end)."""
    run = finish.run
    return [
        NodeFinished(
            workflow_id=run.workflow_id, run_id=run.run_id, stream_id=run.stream_id, report=report
        )
        for report in finish.decided
    ]


def _outcome(finish: RunFinish) -> dict[str, Any]:
    """What a run's closing webhook says besides its ids."""
    data: dict[str, Any] = {"status": finish.status.value}
    if finish.status == RunStatus.COMPLETED:
        data.update(bounded_output(finish.output))
    elif finish.error:
        data["error"] = finish.error
    if finish.budget is not None:
        # Limits, usage and the cap reached, as the run ended (docs/graphs/budgets.md).
        data["budget"] = finish.budget.model_dump(mode="json")
    return data
