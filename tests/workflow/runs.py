"""Driving ``GraphRun`` from tests: start runs, answer prompts, read what they posted."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import orjson
from temporalio.client import Client, WorkflowHandle

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    SignalAck,
    UserInput,
)
from spindle.shared.store.archive import RunArchive
from tests.polling import eventually

T = TypeVar("T")

M = AgentMessageType

__all__ = ["GraphRunner", "M", "eventually", "types_of"]


def types_of(messages: list[dict[str, Any]]) -> list[AgentMessageType]:
    return [AgentMessageType(m["t"]) for m in messages]


def is_subsequence(wanted: list[Any], seen: list[Any]) -> bool:
    """True if ``wanted`` appears in ``seen`` in order (not necessarily adjacent)."""
    it = iter(seen)
    return all(any(w == s for s in it) for w in wanted)


QUERY_RPC_TIMEOUT = timedelta(seconds=3)


@dataclass
class GraphRunner:
    """A client + task queue with a worker behind it, and the bus it posts to."""

    client: Client
    task_queue: str
    bus: MessageBus
    archive: RunArchive

    async def start(
        self,
        graph: GraphSpec,
        run_input: Any = None,
        *,
        workflow_id: str | None = None,
        context: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> WorkflowHandle[Any, GraphRunResult]:
        workflow_id = workflow_id or f"{graph.name}-{uuid.uuid4().hex[:10]}"
        return await self.client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=graph, input=run_input, context=context or {}, meta=meta or {}),
            id=workflow_id,
            task_queue=self.task_queue,
            result_type=GraphRunResult,
        )

    async def messages(self, stream_id: str) -> list[dict[str, Any]]:
        """Every message stored for the run, in order, as wire dicts."""
        return [orjson.loads(m.raw) for m in await self.bus.history(stream_id)]

    async def wait_for_message(
        self, stream_id: str, kind: AgentMessageType, *, timeout: float = 15.0
    ) -> list[dict[str, Any]]:
        """The run's messages once one of type ``kind`` is among them."""

        async def probe() -> list[dict[str, Any]] | None:
            messages = await self.messages(stream_id)
            return messages if kind in types_of(messages) else None

        return await eventually(probe, timeout=timeout, what=f"{kind.name} on {stream_id}")

    @staticmethod
    async def describe(handle: WorkflowHandle[Any, Any]) -> RunDescription:
        # A query that meets a run continuing as new can be lost by the time-skipping
        # server and would hang for the default RPC timeout: fail it soon, so that a
        # caller polling for a state asks again.
        return await handle.query(
            DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=QUERY_RPC_TIMEOUT
        )

    async def wait_for_prompt(
        self, handle: WorkflowHandle[Any, Any], node_id: str, *, timeout: float = 15.0
    ) -> RunDescription:
        """The run's description once it waits on prompt ``node_id`` and has asked.

        "Has asked" means the ask activity has ended, not only that its prompt was
        posted: a cancel that meets the ask's completion makes the time-skipping
        server answer ACTIVITY_UNKNOWN and the run never ends (sdk-java#2391), so a
        test that cancels a waiting run must not race that completion.
        """

        async def probe() -> RunDescription | None:
            description = await self.describe(handle)
            pending = description.pending_input
            if pending is None or pending.node_id != node_id:
                return None
            if AgentMessageType.REQUEST_INPUT not in types_of(await self.messages(handle.id)):
                return None
            activities = (await handle.describe()).raw_description.pending_activities
            asking = any(
                a.activity_id.startswith(f"{node_id}.") and a.activity_id.endswith(".ask")
                for a in activities
            )
            return None if asking else description

        return await eventually(probe, timeout=timeout, what=f"prompt {node_id}")

    @staticmethod
    async def answer(handle: WorkflowHandle[Any, Any], user_input: UserInput) -> SignalAck:
        return await handle.execute_update(USER_INPUT_UPDATE, user_input, result_type=SignalAck)


async def cancel_run(handle: WorkflowHandle[Any, Any]) -> None:
    """Cancel the workflow, asking again until its history records the request.

    The time-skipping test server drops a cancel request that arrives while a
    workflow task is in flight: seen here, no ``WorkflowExecutionCancelRequested``
    event 90 s later, the run still waiting. Asking again is harmless (Temporal
    records one request), so the tests repeat it until the event is there.
    """

    async def requested() -> bool | None:
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_execution_cancel_requested_event_attributes"):
                return True
        await handle.cancel()
        return None

    await eventually(requested, what=f"cancel request of {handle.id} recorded", interval=0.2)
