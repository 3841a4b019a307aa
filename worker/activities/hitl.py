"""``request_input``, ``accept_input`` and ``expire_input``: the activities of a ``prompt`` node.

The workflow asks (REQUEST_INPUT message, run marked paused, the prompt opened in
the ``prompts`` collection), waits for a valid ``UserInput`` update, then accepts
(the user's message echoed as QUESTION, run marked running again, the node's
report archived, the accepted attempt kept). A prompt that expires first is
expired instead (an UPDATE message naming the ``on_expiry`` action taken; see
``spindle.shared.store.prompts`` for who writes which record).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson
from pymongo.errors import PyMongoError
from temporalio import activity

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import EXPIRY_USER, ExpiryAction, NodeStatus, RunStatus
from spindle.shared.platform.logging_setup import bind_activity_log_context
from spindle.shared.platform.settings import Settings
from spindle.shared.store.prompts import (
    AnswerAttempt,
    AnswerOutcome,
    PromptStatus,
    PromptStore,
    prompt_id,
)
from spindle.worker.activities.recorder import (
    build_report,
    elapsed_ms_since,
    input_envelope,
    output_envelope,
)
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.activities.run_webhooks import notify_webhook
from spindle.worker.contracts import (
    ACCEPT_INPUT,
    EXPIRE_INPUT,
    REQUEST_INPUT,
    Empty,
    InputAcceptance,
    InputExpiry,
    InputRequest,
    NodeOutcome,
)

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive


logger = logging.getLogger(__name__)


async def kept_if_possible(write: Awaitable[object], what: str) -> None:
    """Write a prompt record unless MongoDB is down.

    The ``prompts`` records feed the inbox and the answer log; a run must go on
    through a MongoDB outage (docs/operations/redis-mongo.md), so such a write is
    dropped with a warning rather than failing the prompt's activity.
    """
    try:
        await write
    except (PyMongoError, TimeoutError) as exc:
        logger.warning("prompt record not written (%s), MongoDB unavailable: %s", what, exc)


class HitlActivities(RunActivities):
    """Human-in-the-loop activities, with the bus, archive and settings injected.

    Args:
        settings: the worker's settings.
    """

    def __init__(
        self,
        bus: MessageBus,
        archive: RunArchive | None = None,
        *,
        settings: Settings,
    ) -> None:
        super().__init__(bus, archive, settings=settings)
        self.prompts = PromptStore(archive.database) if archive is not None else None

    @activity.defn(name=REQUEST_INPUT)
    async def request_input(self, request: InputRequest) -> Empty:
        """Post REQUEST_INPUT (prompt + uiSchema) and mark the run paused."""
        execution = request.execution
        pending = request.pending
        bind_activity_log_context(node_id=execution.node.id, node_type=execution.node.type)
        poster = self._poster(execution.run)
        await poster.announce_retry(f"prompt {pending.node_id}")
        await poster.post(
            AgentMessageType.REQUEST_INPUT,
            pending.prompt,
            details={
                "node_id": pending.node_id,
                "ui_schema": pending.ui_schema,
                "prompt": pending.prompt,
                # Who may answer and until when: what a client shows next to the form.
                **pending.model_dump(
                    mode="json",
                    include={"expires_at", "on_expiry", "assignees", "roles", "on_cancel"},
                    exclude_defaults=True,
                ),
            },
        )
        if self.prompts is not None:
            await kept_if_possible(
                self.prompts.opened(
                    pending,
                    run=execution.run,
                    tenant_id=execution.run.tenant_id,
                    owner=request.owner,
                    graph_name=execution.run.graph_name,
                ),
                "opened",
            )
        await self.recorder.update_run(
            execution.run,
            status=RunStatus.PAUSED.value,
            pending_input=pending.model_dump(mode="json"),
        )
        await poster.archive()
        await self.tasks.node_started(execution)
        prompt = pending.model_dump(mode="json", include={"node_id", "prompt", "ui_schema"})
        await notify_webhook(
            self.bus, execution.run, "input_required", {"status": "paused", "input": prompt}
        )
        return Empty()

    @activity.defn(name=ACCEPT_INPUT)
    async def accept_input(self, acceptance: InputAcceptance) -> NodeOutcome:
        """Echo the user's answer as QUESTION, resume the run, report the node."""
        started = time.monotonic()
        execution = acceptance.execution
        user_input = acceptance.user_input
        bind_activity_log_context(node_id=execution.node.id, node_type=execution.node.type)
        poster = self._poster(execution.run)
        await poster.announce_retry(f"prompt {acceptance.pending.node_id}")
        text = user_input.message
        if not text:
            text = orjson.dumps(acceptance.answer, option=orjson.OPT_NON_STR_KEYS).decode()
        await poster.post(
            AgentMessageType.QUESTION,
            text,
            details={
                "node_id": acceptance.pending.node_id,
                "client_message_id": user_input.client_message_id,
                # Who answered, as the gateway authenticated them.
                "user_id": user_input.user_id,
            },
        )
        await self.recorder.update_run(
            execution.run, status=RunStatus.RUNNING.value, pending_input=None
        )
        waited_ms = elapsed_ms_since(execution.started_at)
        report = build_report(
            execution,
            NodeStatus.SUCCESS,
            duration_ms=waited_ms or (time.monotonic() - started) * 1000,
            output=acceptance.answer,
        )
        await self.recorder.save_report(
            execution,
            report,
            input=input_envelope(
                execution,
                {"prompt": acceptance.pending.prompt, "ui_schema": acceptance.pending.ui_schema},
            ),
            output=output_envelope(execution, acceptance.answer),
        )
        await poster.archive()
        if self.prompts is not None:
            await kept_if_possible(self._keep_acceptance(acceptance), "answered")
        await self.tasks.node_finished(execution, acceptance.answer)
        return NodeOutcome(output=acceptance.answer, report=report)

    async def _keep_acceptance(self, acceptance: InputAcceptance) -> None:
        assert self.prompts is not None
        run = acceptance.execution.run
        pending = acceptance.pending
        at = acceptance.answered_at or datetime.now(UTC).isoformat()
        await self.prompts.record_attempt(
            # The prompt's own id: one accepted attempt per prompt, however often retried.
            prompt_id(run, pending),
            AnswerAttempt(
                workflow_id=run.workflow_id,
                tenant_id=run.tenant_id,
                node_id=pending.node_id,
                visit=pending.visit,
                user_id=acceptance.user_input.user_id,
                at=datetime.fromisoformat(at),
                outcome=AnswerOutcome.ACCEPTED,
                client_message_id=acceptance.user_input.client_message_id,
            ),
        )
        await self.prompts.settle(run, pending, PromptStatus.ANSWERED)

    @activity.defn(name=EXPIRE_INPUT)
    async def expire_input(self, expiry: InputExpiry) -> NodeOutcome:
        """Say that the prompt expired and what happens now; report a skipped or failed node.

        Returns:
            The node's outcome when ``on_expiry`` is ``skip`` (output null, port
            ``expired``); for ``answer`` and ``fail`` the workflow goes on by itself.
        """
        execution = expiry.execution
        pending = expiry.pending
        action = pending.on_expiry or ExpiryAction.FAIL
        bind_activity_log_context(node_id=execution.node.id, node_type=execution.node.type)
        poster = self._poster(execution.run)
        await poster.announce_retry(f"prompt {pending.node_id}")
        taken = {
            ExpiryAction.ANSWER: f"the default answer is taken (as {EXPIRY_USER})",
            ExpiryAction.SKIP: "the prompt is skipped and the run goes on",
            ExpiryAction.FAIL: "the prompt fails",
        }[action]
        await poster.post(
            AgentMessageType.UPDATE,
            f"prompt '{pending.node_id}' expired at {pending.expires_at} without an answer: "
            f"{taken}",
            details={
                "node_id": pending.node_id,
                "event": "prompt_expired",
                "expires_at": pending.expires_at,
                "on_expiry": action.value,
            },
        )
        if self.prompts is not None:
            await kept_if_possible(
                self.prompts.settle(execution.run, pending, PromptStatus.EXPIRED), "expired"
            )
        await self.recorder.update_run(
            execution.run, status=RunStatus.RUNNING.value, pending_input=None
        )
        status = NodeStatus.SKIPPED if action is ExpiryAction.SKIP else NodeStatus.FAILED
        report = build_report(
            execution,
            status,
            duration_ms=elapsed_ms_since(execution.started_at) or 0.0,
            error=None if status is NodeStatus.SKIPPED else f"expired at {pending.expires_at}",
        ).model_copy(update={"output_summary": f"expired at {pending.expires_at}"})
        if action is not ExpiryAction.ANSWER:
            await self.recorder.save_report(execution, report)
        await poster.archive()
        return NodeOutcome(output=None, ports=["expired"], report=report)
