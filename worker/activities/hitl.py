"""``request_input`` and ``accept_input``: the two activities of a ``prompt`` node.

The workflow asks (REQUEST_INPUT message, run marked paused), waits for a valid
``UserInput`` update, then accepts (the user's message echoed as QUESTION, run
marked running again, the node's report archived).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import orjson
from temporalio import activity

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import NodeStatus, RunStatus
from spindle.shared.platform.logging_setup import bind_activity_log_context
from spindle.worker.activities.poster import MessagePoster
from spindle.worker.activities.recorder import (
    RunRecorder,
    build_report,
    elapsed_ms_since,
    input_envelope,
    output_envelope,
)
from spindle.worker.activities.run_webhooks import notify_webhook
from spindle.worker.activities.task_sync import TaskSync
from spindle.worker.contracts import (
    ACCEPT_INPUT,
    REQUEST_INPUT,
    Empty,
    InputAcceptance,
    InputRequest,
    NodeOutcome,
)

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive


class HitlActivities:
    """Human-in-the-loop activities, with the bus and archive injected."""

    def __init__(self, bus: MessageBus, archive: RunArchive | None = None) -> None:
        self.bus = bus
        self.archive = archive
        self.recorder = RunRecorder(archive)
        self.tasks = TaskSync(bus, archive)

    @activity.defn(name=REQUEST_INPUT)
    async def request_input(self, request: InputRequest) -> Empty:
        """Post REQUEST_INPUT (prompt + uiSchema) and mark the run paused."""
        execution = request.execution
        pending = request.pending
        bind_activity_log_context(node_id=execution.node.id, node_type=execution.node.type)
        poster = MessagePoster(self.bus, execution.run, archive=self.archive)
        await poster.announce_retry(f"prompt {pending.node_id}")
        await poster.post(
            AgentMessageType.REQUEST_INPUT,
            pending.prompt,
            details={
                "node_id": pending.node_id,
                "ui_schema": pending.ui_schema,
                "prompt": pending.prompt,
            },
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
        poster = MessagePoster(self.bus, execution.run, archive=self.archive)
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
        await self.tasks.node_finished(execution, acceptance.answer)
        return NodeOutcome(output=acceptance.answer, report=report)
