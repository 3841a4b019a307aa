"""Holding a long chat with an interactive agent, one message after the other's IDLE.

Shared by the size test (``tests/integration/test_long_chat.py``) and the
benchmark's ``chat`` section (``tests/bench/chat.py``). The driver sends each
message as the ``user_message`` update through the Temporal client (what
``POST …/signal/UserInput`` does after its checks) and waits, on the run's live
Redis channel (no polling, no sleep), for the IDLE that follows its answer. It
notes when the update returned, the first STREAMING_CHUNK, the ANSWER and the
IDLE arrived, and every ANSWER seen, so a caller checks each message was
answered once, in order.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from redis.asyncio import Redis
from temporalio.api.common.v1 import Payloads
from temporalio.client import Client, WorkflowHandle

from spindle.shared.bus.message_bus import live_channel, parse_live_payload
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import (
    COMPLETE_AGENT_UPDATE,
    GRAPH_RUN_WORKFLOW,
    USER_MESSAGE_UPDATE,
    CompleteAck,
    CompleteAgent,
    GraphRunInput,
    GraphRunResult,
    SignalAck,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure

M = AgentMessageType
WAIT_S = 120.0
"""Longest wait for one live message (a continue-as-new, a retried activity)."""


def chat_agent_graph(name: str = "long-chat", **params: Any) -> GraphSpec:
    """One interactive agent with the calculator: a message without arithmetic is
    answered in one LLM turn by the offline model (it quotes the message)."""
    spec = parse_graph(
        {
            "name": name,
            "entry": "chat",
            "nodes": [
                {
                    "id": "chat",
                    "type": "agent",
                    "params": {"tools": ["calculator"], "interactive": True, **params},
                }
            ],
            "edges": [],
        }
    )
    validate_structure(spec)
    return spec


@dataclass
class Exchange:
    """One message's timings (ms from sending it) and the answers it got."""

    text: str
    update_ms: float
    first_chunk_ms: float | None
    answer_ms: float | None
    idle_ms: float
    answers: list[str] = field(default_factory=list)
    updates: list[str] = field(default_factory=list)
    """UPDATE posts (e.g. a summary of the dropped conversation)."""


class ChatDriver:
    """Subscribes to a run's live channel and holds its conversation.

    Args:
        client: the Temporal client.
        redis_url: the bus's Redis (its live channel is read).
        workflow_id: the run (its stream id is its workflow id).
    """

    def __init__(self, client: Client, redis_url: str, workflow_id: str) -> None:
        self.workflow_id = workflow_id
        self.handle: WorkflowHandle[Any, GraphRunResult] = client.get_workflow_handle(
            workflow_id, result_type=GraphRunResult
        )
        self._redis = Redis.from_url(redis_url)
        self._pubsub = self._redis.pubsub()
        self.questions: list[str] = []
        self.first_run_id = ""

    async def open(self) -> None:
        await self._pubsub.subscribe(live_channel(self.workflow_id))

    async def close(self) -> None:
        await self._pubsub.aclose()  # type: ignore[no-untyped-call]
        await self._redis.aclose()

    async def next_message(self) -> dict[str, Any]:
        """The next live message of the run (skips subscription replies)."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            raw = await self._pubsub.get_message(timeout=deadline - time.monotonic())
            if raw is not None and raw["type"] in ("message", "smessage"):
                message: dict[str, Any] = orjson.loads(parse_live_payload(raw["data"]).raw)
                return message
        raise TimeoutError(f"no message from {self.workflow_id} in {WAIT_S} s")

    async def until_idle(self, started: float | None = None) -> Exchange:
        """Read up to the next IDLE of the main workstream, noting what came before."""
        started = time.perf_counter() if started is None else started
        chunk: float | None = None
        answer: float | None = None
        answers: list[str] = []
        updates: list[str] = []
        while True:
            message = await self.next_message()
            if message.get("w"):
                continue  # a workstream's post, not the main conversation's
            now = (time.perf_counter() - started) * 1000
            kind = message["t"]
            if kind == M.STREAMING_CHUNK and chunk is None:
                chunk = now
            elif kind == M.ANSWER:
                answer = now if answer is None else answer
                answers.append(message.get("m", ""))
            elif kind == M.UPDATE:
                updates.append(message.get("m", ""))
            elif kind == M.QUESTION:
                self.questions.append(message.get("m", ""))
            elif kind == M.IDLE:
                return Exchange("", 0.0, chunk, answer, now, answers, updates)

    async def say(self, text: str, client_message_id: str | None = None) -> Exchange:
        """Send ``text`` and read until the IDLE after its answer."""
        started = time.perf_counter()
        message = UserInput(message=text, client_message_id=client_message_id)
        await self.handle.execute_update(USER_MESSAGE_UPDATE, message, result_type=SignalAck)
        update_ms = (time.perf_counter() - started) * 1000
        exchange = await self.until_idle(started)
        exchange.text, exchange.update_ms = text, update_ms
        return exchange

    async def complete(self) -> GraphRunResult:
        """COMPLETE the agent and wait for the run's end."""
        await self.handle.execute_update(
            COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck
        )
        return await self.handle.result()


async def start_chat(
    client: Client,
    graph: GraphSpec,
    task_queue: str,
    *,
    redis_url: str,
    opening: str = "hello",
    workflow_id: str | None = None,
    **run_input: Any,
) -> tuple[ChatDriver, Exchange]:
    """Start a chat run, subscribed before its start; returns the driver and the
    opening exchange (up to its first IDLE)."""
    workflow_id = workflow_id or f"{graph.name}-{uuid.uuid4().hex[:8]}"
    driver = ChatDriver(client, redis_url, workflow_id)
    await driver.open()
    started = time.perf_counter()
    handle = await client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=graph, input={"message": opening}, **run_input),
        id=workflow_id,
        task_queue=task_queue,
        result_type=GraphRunResult,
    )
    driver.first_run_id = handle.first_execution_run_id or ""
    return driver, await driver.until_idle(started)


def payload_bytes(payloads: Payloads) -> int:
    return sum(p.ByteSize() for p in payloads.payloads)


def quoted(text: str, answer: str) -> bool:
    """The offline model's answer to ``text`` quotes it."""
    return f'"{text}"' in answer
