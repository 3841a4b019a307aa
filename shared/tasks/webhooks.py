"""Run webhooks: a run's completion, failure or question POSTed to a URL the
caller gave on ``POST /runs`` (docs/protocols/outbound.md "Completion webhooks").

They reuse the push outbox (``shared.tasks.push``): the gateway stores the
webhook as a ``PushConfig`` (with its signing secret) under the root
``webhook:<workflow id>`` before the run starts, the worker's activities queue
one job per event in the same outbox, and the worker's ``PushDelivery`` loop
delivers them: durable in Redis, retried with backoff, through the outbound
policy, with the outbox's per-destination concurrency, breaker and tenant
fairness. Each POST is signed per the Standard Webhooks convention
(``shared.platform.webhook_signature``).

Body: ``{"type": "run.<event>", "timestamp": <ISO 8601>, "data": {...}}`` with
``data`` holding ``workflow_id``, ``run_id``, ``graph``, ``status`` and, per
event, ``output`` (completed; left out above ``MAX_OUTPUT_BYTES``: read it
from ``GET /runs/{id}``), ``error`` (failed, canceled, ...) or ``input``
(input_required: ``node_id``, ``prompt``, ``ui_schema``).
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson
from pydantic import Field, ValidationError

from spindle.shared.store.run_document import storable
from spindle.shared.tasks.push import CONFIG_TTL_SECONDS, PushConfig, PushJob, PushOutbox

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient

log = logging.getLogger(__name__)

WebhookEvent = Literal[
    "completed", "failed", "canceled", "terminated", "timed_out", "input_required"
]
WEBHOOK_EVENTS: tuple[str, ...] = get_args(WebhookEvent)
# A larger output is left out of the body (receivers read it from the run).
MAX_OUTPUT_BYTES = 64 * 1024


class WebhookConfig(PushConfig):
    """A run's webhook as stored: the push config plus the events it wants."""

    events: list[str] = Field(default_factory=lambda: list(WEBHOOK_EVENTS))


def webhook_root(workflow_id: str) -> str:
    """The outbox root of a run's webhook (never a seed 003 task id: those are UUIDs)."""
    return f"webhook:{workflow_id}"


def message_id(workflow_id: str, event: str, occurrence: str) -> str:
    """The ``webhook-id`` of one event: stable across activity retries, so a
    receiver drops a duplicate delivery."""
    digest = hashlib.sha256(f"{workflow_id}\0{event}\0{occurrence}".encode()).hexdigest()
    return f"msg_{digest[:32]}"


def webhook_body(event: str, data: dict[str, Any]) -> dict[str, Any]:
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": f"run.{event}", "timestamp": stamp, "data": data}


def bounded_output(output: Any) -> dict[str, Any]:
    """``{"output": ...}``, or ``{"output_omitted": true}`` when it is too large.

    Integers beyond 64 bits become decimal strings, as in the archive
    (docs/api/index.md): JSON encoders here refuse them, and a run's end must not.
    """
    output = storable(output)
    size = len(orjson.dumps(output, option=orjson.OPT_NON_STR_KEYS, default=str))
    return {"output": output} if size <= MAX_OUTPUT_BYTES else {"output_omitted": True}


class Webhooks:
    """Register a run's webhook (gateway) and queue its events (worker)."""

    def __init__(self, redis: RedisClient) -> None:
        self.outbox = PushOutbox(redis)

    async def register(self, workflow_id: str, config: WebhookConfig) -> bool:
        """Store the webhook of a run about to start; False when the run already
        has one (an idempotent retry of the same start keeps the first)."""
        key = self.outbox.config_key(webhook_root(workflow_id))
        stored = await self.outbox.redis.set(
            key, config.model_dump_json(), ex=CONFIG_TTL_SECONDS, nx=True
        )
        return bool(stored)

    async def notify(
        self, workflow_id: str, event: str, data: dict[str, Any], *, occurrence: str
    ) -> bool:
        """Queue ``event`` if the run has a webhook that wants it.

        Args:
            occurrence: what tells this event apart from another of the same
                kind in the run (a prompt's activity), for its ``webhook-id``.

        Returns:
            Whether a delivery was queued.
        """
        root = webhook_root(workflow_id)
        raw = await self.outbox.redis.get(self.outbox.config_key(root))
        if raw is None:
            return False
        try:
            config = WebhookConfig.model_validate_json(raw)
        except ValidationError:
            log.warning("webhook of run %s is unreadable; not notified", workflow_id)
            return False
        if event not in config.events:
            return False
        job = PushJob(
            payload=webhook_body(event, {"workflow_id": workflow_id, **data}),
            message_id=message_id(workflow_id, event, occurrence),
        )
        return await self.outbox.enqueue_job(root, job)
