"""Queue a run's webhook events from its activities (``shared.tasks.webhooks``).

Called where the worker knows the event: ``finish_run`` (completed, failed,
canceled, ...) and ``request_input`` (input_required). A failure to queue fails
the activity, which Temporal retries: the event is not lost, and a retry queues
it under the same ``webhook-id`` (the activity's id), so receivers can drop
the duplicate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import activity

from spindle.shared.tasks.webhooks import Webhooks

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.worker.contracts import RunRef


async def notify_webhook(bus: MessageBus, run: RunRef, event: str, data: dict[str, Any]) -> bool:
    """Queue ``event`` of ``run`` for its webhook, if it has one that wants it."""
    occurrence = run.run_id
    if activity.in_activity():
        info = activity.info()
        occurrence = f"{info.workflow_run_id}/{info.activity_id}"
    body = {"run_id": run.run_id, "graph": run.graph_name, **data}
    return await Webhooks(bus.redis).notify(run.workflow_id, event, body, occurrence=occurrence)
