"""An agent's memory in the ``llm_turn`` activity (docs/conversations.md, Memory),
against the real Redis: the window keeps what is sent bounded however long the
conversation, the summarize strategy records and posts its summary, and the
memory log holds the model's replies for the next visit."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from temporalio.exceptions import ApplicationError

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.memory import estimate_tokens
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.platform.settings import Settings
from spindle.shared.store.agent_memory import AgentMemory, run_memory_base
from spindle.worker.activities.agent import AgentActivities
from spindle.worker.contracts import ChatMessage, LlmTurnInput, NodeExecution, RunRef
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.llm.context_policy import SUMMARY_HEADER
from spindle.worker.llm.offline import OfflineProvider
from tests.integration.activity_env import env

pytestmark = pytest.mark.integration


class RecordingModel(OfflineProvider):
    """The offline model, remembering every request it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(request)
        return super().respond(request)


@pytest.fixture(scope="module")
def io_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(
        redis_url=redis_url, mongo_url=mongo_url, mongo_db="spindle_memory", llm_streaming=False
    )


@pytest.fixture(scope="module")
async def bus(io_settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(io_settings)
    yield bus
    await bus.close()


def _execution(params: dict[str, Any], prompt: str = "hello") -> NodeExecution:
    wf = f"mem-{uuid.uuid4().hex[:12]}"
    return NodeExecution(
        run=RunRef(workflow_id=wf, run_id="r1", stream_id=wf, graph_name="g"),
        node=NodeSpec.model_validate({"id": "chat", "type": "agent", "params": params}),
        state={"input": prompt, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


def _tokens(request: LlmRequest) -> int:
    return sum(estimate_tokens(m.model_dump()) for m in request.messages)


async def test_a_10000_message_conversation_stays_bounded_under_a_window(
    bus: MessageBus, io_settings: Settings
) -> None:
    model = RecordingModel()
    acts = AgentActivities(bus, None, model, settings=io_settings)
    ex = _execution({"context": {"max_tokens": 2000, "strategy": "window"}})
    run = ex.run
    memory = AgentMemory(bus.redis, 3600)
    base = run_memory_base(run.stream_id, run.workflow_id, "chat")
    # 10,000 messages of one visit, as 5,000 user/assistant exchanges.
    start, _ = await memory.begin_visit(base, f"{run.workflow_id}:chat.1", [])
    earlier = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "w " * 20}
        for i in range(10_000)
    ]
    await memory.write(base, start, earlier)

    stored = 10_000
    for turn in range(1, 4):
        text = f"question {turn}: what did we say?"
        result = await env(f"chat.1.t{turn}").run(
            acts.llm_turn,
            LlmTurnInput(
                execution=ex,
                turn=turn,
                messages=[ChatMessage(role="user", content=text)],
                conversation="chat.1",
                stored=stored,
                memory_key="chat",
            ),
        )
        stored += 2  # the user message and the reply the activity stored
        request = model.requests[-1]
        assert _tokens(request) <= 2000, "what is sent stays under max_tokens"
        assert request.messages[0].role == "system"
        assert request.messages[-1].content == text, "the latest user message is kept"
        assert result.message.content and "what did we say" in result.message.content
        assert len(request.messages) < 200

    meta = await memory.meta(base)
    assert meta.length == 10_006
    assert meta.dropped > 9_800, "the window moved: older messages are not loaded again"
    # The window never starts in the middle of an exchange's tool results.
    [first] = await memory.entries(base, meta.dropped, meta.dropped + 1)
    assert first.message["role"] != "tool"


async def test_summarize_records_the_summary_and_posts_it(
    bus: MessageBus, io_settings: Settings
) -> None:
    model = RecordingModel()
    acts = AgentActivities(bus, None, model, settings=io_settings)
    ex = _execution({"context": {"max_tokens": 300, "strategy": "summarize"}})
    run = ex.run
    stored = 0
    messages: list[ChatMessage] = []
    for turn in range(1, 9):
        messages.append(ChatMessage(role="user", content=f"fact {turn}: " + "detail " * 30))
        result = await env(f"chat.1.t{turn}").run(
            acts.llm_turn,
            LlmTurnInput(
                execution=ex,
                turn=turn,
                messages=messages[stored:],
                conversation="chat.1",
                stored=stored,
                memory_key="chat",
            ),
        )
        stored = len(messages)
        messages.append(result.message)
        assert result.usage is not None

    summaries = [
        r
        for r in model.requests
        if r.messages[0].content and "memory of a" in r.messages[0].content
    ]
    assert summaries, "the model was asked to summarize what was dropped"
    last = model.requests[-1]
    assert last.messages[1].role == "system"
    assert (last.messages[1].content or "").startswith(SUMMARY_HEADER)
    assert _tokens(last) <= 300 + 200, "summary plus what is kept stays near max_tokens"

    memory = AgentMemory(bus.redis, 3600)
    meta = await memory.meta(run_memory_base(run.stream_id, run.workflow_id, "chat"))
    assert meta.summary and meta.dropped > 0
    posted = [orjson.loads(m.raw) for m in await bus.history(run.stream_id)]
    updates = [m for m in posted if m["t"] == T.UPDATE and "Summarized" in m["m"]]
    assert len(updates) == len(summaries)
    assert updates[-1]["d"]["summary"] == meta.summary


async def test_a_memory_whose_messages_are_gone_fails_the_turn_naming_it(
    bus: MessageBus, io_settings: Settings
) -> None:
    acts = AgentActivities(bus, None, RecordingModel(), settings=io_settings)
    ex = _execution({})
    first = LlmTurnInput(
        execution=ex, turn=1, messages=[], conversation="chat.1", stored=0, memory_key="chat"
    )
    reply = await env("chat.1.t1").run(acts.llm_turn, first)
    run = ex.run
    await bus.redis.hdel(f"{run_memory_base(run.stream_id, run.workflow_id, 'chat')}:log", "0")
    second = first.model_copy(update={"turn": 2, "messages": [reply.message], "stored": 1})
    with pytest.raises(ApplicationError, match="memory are gone") as failed:
        await env("chat.1.t2").run(acts.llm_turn, second)
    assert failed.value.non_retryable


async def test_a_restarted_worker_continues_the_memory(
    bus: MessageBus, io_settings: Settings
) -> None:
    before = RecordingModel()
    ex = _execution({}, prompt="remember the number 4711")
    first = LlmTurnInput(
        execution=ex, turn=1, messages=[], conversation="chat.1", stored=0, memory_key="chat"
    )
    await env("chat.1.t1").run(
        AgentActivities(bus, None, before, settings=io_settings).llm_turn, first
    )
    # Another worker process (new activities, new Redis connections) takes the next visit.
    after = RecordingModel()
    restarted = MessageBus.from_settings(io_settings)
    try:
        second = first.model_copy(update={"conversation": "chat.2"})
        second.execution.visit = 2
        await env("chat.2.t1").run(
            AgentActivities(restarted, None, after, settings=io_settings).llm_turn, second
        )
    finally:
        await restarted.close()
    seen = [m.content or "" for m in after.requests[-1].messages]
    assert seen[1] == "remember the number 4711"
    assert "4711" in seen[2] and seen[3] == "remember the number 4711"
