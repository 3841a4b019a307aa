"""Queue a run's webhook events from its activities (``shared.tasks.webhooks``).

Called where the worker knows the event: ``finish_run`` (completed, failed,
canceled, ...) and ``request_input`` (input_required). A failure to queue fails
the activity, which Temporal retries: the event is not lost, and a retry queues
it under the same ``webhook-id`` (the activity's id), so receivers can drop
the duplicate.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.service import RPCError

from spindle.shared.contracts.run_end import EndedBy, EndedByKind
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.store.run_ends import RunEnds
from spindle.shared.tasks.webhooks import Webhooks
from spindle.shared.temporal.closed_runs import cancel_request

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.worker.contracts import RunFinish, RunRef

log = logging.getLogger(__name__)


async def notify_webhook(bus: MessageBus, run: RunRef, event: str, data: dict[str, Any]) -> bool:
    """Queue ``event`` of ``run`` for its webhook, if it has one that wants it."""
    occurrence = run.run_id
    if activity.in_activity():
        info = activity.info()
        occurrence = f"{info.workflow_run_id}/{info.activity_id}"
    body = {"run_id": run.run_id, "graph": run.graph_name, **data}
    return await Webhooks(bus.redis).notify(run.workflow_id, event, body, occurrence=occurrence)


async def run_end(bus: MessageBus, finish: RunFinish) -> tuple[str | None, EndedBy | None]:
    """The error (a sentence) and ``ended_by`` of a run's end that ``finish_run`` records.

    A cancel says who asked: the note the gateway or the run's conversation left
    (``shared.store.run_ends``), else Temporal's cancel request (a Temporal UI, CLI
    or client: its identity and reason). A timeout names the deadline, a failure at
    a budget cap the budget (docs/protocols/outbound.md).
    """
    status, error = finish.status, finish.error
    if status == RunStatus.TIMED_OUT:
        return error, EndedBy(kind=EndedByKind.DEADLINE, reason=error)
    if status == RunStatus.FAILED:
        budget = finish.budget
        if budget is not None and budget.exhausted is not None:
            return error, EndedBy(kind=EndedByKind.BUDGET, id=budget.exhausted.value, reason=error)
        return error, None
    if status != RunStatus.CANCELED:
        return error, None
    ended_by = await RunEnds(bus.redis).read(finish.run.workflow_id)
    if ended_by is None and activity.in_activity():
        try:
            ended_by = await cancel_request(activity.client(), finish.run.workflow_id, None)
        except (RPCError, RuntimeError) as exc:  # worth a round trip, not a failed end
            log.warning("cancel request of %s unreadable: %s", finish.run.workflow_id, exc)
    if ended_by is None:
        return error, None
    return ended_by.sentence(status.value), ended_by


def ended_data(error: str | None, ended_by: EndedBy | None) -> dict[str, Any]:
    """What a run's closing webhook says of who ended it, besides its ids."""
    data: dict[str, Any] = {}
    if error:
        data["error"] = error
    if ended_by is not None:
        data["ended_by"] = ended_by.model_dump(mode="json", exclude_none=True)
    return data
