"""The OpenAI-compatible provider against a fake chat-completions server on loopback.

The fake (a small Starlette app under uvicorn) stands in for the outside world a
test cannot reach: it records each request and answers with canned completions,
first a tool call, then a final answer; asked to ``stream``, it sends the same
replies as server-sent ``chat.completion.chunk`` events the way OpenAI does
(tool-call arguments in pieces, usage in a last chunk without choices).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
import redis.asyncio as aioredis
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.testing import ActivityEnvironment

from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import LlmAuthenticationError, LlmRequestRejected
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.platform.settings import Settings
from spindle.worker.activities.agent import AgentActivities
from spindle.worker.contracts import ChatMessage, LlmTurnInput, NodeExecution, RunRef, ToolCall
from spindle.worker.llm.base import (
    LlmRequest,
    LlmResponse,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from spindle.worker.llm.openai_compat import OpenAICompatProvider
from tests.polling import eventually

pytestmark = pytest.mark.integration

SEARCH = ToolSpec(
    name="search_notes",
    description="Search the notes.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string"}},
        "required": ["query"],
    },
)


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model-2",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 31, "completion_tokens": 7, "total_tokens": 38},
    }


STREAMED_ANSWER = "Redis keeps the log, and Mongo keeps the archive."


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model-2",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def streamed_tool_calls() -> list[dict[str, Any]]:
    """Two tool calls, their arguments cut in pieces and interleaved."""

    def call(index: int, **fields: Any) -> dict[str, Any]:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    return [
        chunk({"role": "assistant", "content": "Let me look."}),
        call(0, id="call_a", type="function", function={"name": "search_notes", "arguments": ""}),
        call(0, function={"arguments": '{"que'}),
        call(1, id="call_b", type="function", function={"name": "search_notes", "arguments": ""}),
        call(0, function={"arguments": 'ry": "redis"}'}),
        call(1, function={"arguments": '{"query": "mongo"}'}),
        chunk({}, "tool_calls"),
    ]


def streamed_answer() -> list[dict[str, Any]]:
    words = STREAMED_ANSWER.split(" ")
    pieces = [words[0]] + [" " + w for w in words[1:]]
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk({}, "stop"),
    ]


class FakeOpenAI:
    """Records requests; replies with a tool call until a tool result is sent.

    A streamed reply pauses after its first content token while ``paused`` is set
    (a model thinking mid-answer), until the test releases it.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])
        self.paused: asyncio.Event | None = None

    async def sse(self, body: dict[str, Any], events: list[dict[str, Any]]) -> StreamingResponse:
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40}
            events = [*events, {**chunk({}), "choices": [], "usage": usage}]

        async def frames() -> AsyncIterator[bytes]:
            for n, event in enumerate(events):
                if n == 2 and self.paused is not None:  # after the role and one token
                    await self.paused.wait()
                yield b"data: " + orjson.dumps(event) + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    async def chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if request.headers.get("authorization") == "Bearer wrong":
            return JSONResponse(
                {"error": {"message": "Incorrect API key", "type": "invalid_request_error"}},
                status_code=401,
            )
        if body["model"] == "missing-model":
            return JSONResponse(
                {"error": {"message": "model not found", "type": "invalid_request_error"}},
                status_code=404,
            )
        if body.get("stream"):
            asked_tools = body.get("tools") and not any(
                m["role"] == "tool" for m in body["messages"]
            )
            return await self.sse(body, streamed_tool_calls() if asked_tools else streamed_answer())
        if not any(m["role"] == "tool" for m in body["messages"]):
            return JSONResponse(
                completion(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_abc",
                                "type": "function",
                                "function": {
                                    "name": "search_notes",
                                    "arguments": '{"query": "redis"}',
                                },
                            }
                        ],
                    },
                    "tool_calls",
                )
            )
        return JSONResponse(
            completion({"role": "assistant", "content": "Redis keeps the log."}, "stop")
        )


@pytest.fixture(scope="module")
async def fake() -> AsyncIterator[tuple[FakeOpenAI, str]]:
    server_app = FakeOpenAI()
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(server_app.app, host="127.0.0.1", port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    await eventually(
        lambda: server.started,
        what="fake OpenAI server listens",
        timeout=10,
        interval=0.01,
        alive=lambda: not task.done(),
    )
    yield server_app, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    await task


async def test_tool_call_then_final_answer(fake: tuple[FakeOpenAI, str]) -> None:
    server, base_url = fake
    server.requests.clear()
    server.headers.clear()
    llm = OpenAICompatProvider(model="fake-model", base_url=base_url, api_key="sk-test")
    opening = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="What keeps the log?"),
    ]
    first = await llm.complete(LlmRequest(messages=opening, tools=[SEARCH], temperature=0.2))

    assert not first.final
    assert first.message.tool_calls == [
        ToolCall(id="call_abc", name="search_notes", arguments={"query": "redis"})
    ]
    assert first.model == "fake-model-2"
    assert first.usage is not None and first.usage.prompt_tokens == 31
    sent = server.requests[0]
    assert sent["model"] == "fake-model"
    assert sent["temperature"] == 0.2
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What keeps the log?"},
    ]
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "search_notes",
                "description": "Search the notes.",
                "parameters": SEARCH.parameters,
            },
        }
    ]
    assert server.headers[0]["authorization"] == "Bearer sk-test"

    result = ChatMessage(
        role="tool", content='[{"id": "redis"}]', tool_call_id="call_abc", name="search_notes"
    )
    second = await llm.complete(
        LlmRequest(messages=[*opening, first.message, result], tools=[SEARCH], model="other")
    )
    assert second.final and second.message.content == "Redis keeps the log."
    sent = server.requests[1]
    assert sent["model"] == "other" and "temperature" not in sent
    assert sent["messages"][2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_abc",
                "type": "function",
                "function": {"name": "search_notes", "arguments": '{"query":"redis"}'},
            }
        ],
    }
    assert sent["messages"][3] == {
        "role": "tool",
        "content": '[{"id": "redis"}]',
        "tool_call_id": "call_abc",
    }
    await llm.close()


async def test_no_tools_key_when_no_tools_are_offered(fake: tuple[FakeOpenAI, str]) -> None:
    server, base_url = fake
    server.requests.clear()
    server.headers.clear()
    llm = OpenAICompatProvider(model="fake-model", base_url=base_url)
    await llm.complete(LlmRequest(messages=[ChatMessage(role="user", content="hi")]))
    assert "tools" not in server.requests[0]
    # A local server needs no key; the client still sends a placeholder.
    assert server.headers[0]["authorization"] == "Bearer not-needed"
    await llm.close()


async def test_refusals_become_non_retryable_errors(fake: tuple[FakeOpenAI, str]) -> None:
    _, base_url = fake
    wrong_key = OpenAICompatProvider(model="fake-model", base_url=base_url, api_key="wrong")
    with pytest.raises(LlmAuthenticationError, match="Incorrect API key"):
        await wrong_key.complete(LlmRequest(messages=[ChatMessage(role="user", content="hi")]))
    await wrong_key.close()
    missing = OpenAICompatProvider(model="missing-model", base_url=base_url)
    with pytest.raises(LlmRequestRejected, match="model not found"):
        await missing.complete(LlmRequest(messages=[ChatMessage(role="user", content="hi")]))
    await missing.close()


async def test_streamed_tool_calls_are_assembled_from_their_pieces(
    fake: tuple[FakeOpenAI, str],
) -> None:
    server, base_url = fake
    server.requests.clear()
    llm = OpenAICompatProvider(model="fake-model", base_url=base_url)
    request = LlmRequest(messages=[ChatMessage(role="user", content="notes?")], tools=[SEARCH])
    events = [event async for event in llm.stream(request)]
    await llm.close()

    sent = server.requests[0]
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Let me look.")]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas][:2] == [
        (0, "call_a", "search_notes"),
        (0, None, None),
    ]
    assert "".join(d.arguments for d in deltas if d.index == 0) == '{"query": "redis"}'
    response = events[-1]
    assert isinstance(response, LlmResponse) and not response.final
    assert response.message.content == "Let me look."
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="search_notes", arguments={"query": "redis"}),
        ToolCall(id="call_b", name="search_notes", arguments={"query": "mongo"}),
    ]
    assert response.model == "fake-model-2"
    assert response.usage is not None and response.usage.completion_tokens == 9


async def test_streamed_answer_with_and_without_usage(fake: tuple[FakeOpenAI, str]) -> None:
    server, base_url = fake
    server.requests.clear()
    request = LlmRequest(messages=[ChatMessage(role="user", content="where is the log?")])
    llm = OpenAICompatProvider(model="fake-model", base_url=base_url)
    events = [event async for event in llm.stream(request)]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) == len(STREAMED_ANSWER.split(" "))
    assert "".join(texts) == STREAMED_ANSWER
    response = events[-1]
    assert isinstance(response, LlmResponse) and response.final
    assert response.message.content == STREAMED_ANSWER
    assert response.usage is not None and response.usage.prompt_tokens == 31
    await llm.close()

    # A server that rejects stream_options: turn it off; usage is then unknown.
    quiet = OpenAICompatProvider(model="fake-model", base_url=base_url, stream_usage=False)
    events = [event async for event in quiet.stream(request)]
    await quiet.close()
    assert "stream_options" not in server.requests[-1]
    last = events[-1]
    assert isinstance(last, LlmResponse) and last.usage is None
    assert last.message.content == STREAMED_ANSWER


async def test_streamed_refusals_are_still_non_retryable(fake: tuple[FakeOpenAI, str]) -> None:
    _, base_url = fake
    wrong_key = OpenAICompatProvider(model="fake-model", base_url=base_url, api_key="wrong")
    request = LlmRequest(messages=[ChatMessage(role="user", content="hi")])
    with pytest.raises(LlmAuthenticationError, match="Incorrect API key"):
        _ = [event async for event in wrong_key.stream(request)]
    await wrong_key.close()


async def test_llm_turn_streams_the_models_tokens_to_the_run(
    fake: tuple[FakeOpenAI, str], redis_url: str, activity_settings: Settings
) -> None:
    """The ``llm_turn`` activity with the OpenAI-compatible provider: the tokens
    reach the run's stream as STREAMING_CHUNK messages before the ANSWER."""
    server, base_url = fake
    server.paused = release = asyncio.Event()
    bus = MessageBus(aioredis.Redis.from_url(redis_url, decode_responses=False))
    llm = OpenAICompatProvider(model="fake-model", base_url=base_url)
    wf = f"oai-{uuid.uuid4().hex[:12]}"
    run = RunRef(workflow_id=wf, run_id="r1", stream_id=wf, graph_name="g")
    execution = NodeExecution(
        run=run,
        node=NodeSpec.model_validate({"id": "a", "type": "agent", "params": {"prompt": "log?"}}),
        state={"input": None, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, activity_id="a.1.t1", attempt=1)

    async def first_chunk_posted() -> bool:
        return any(orjson.loads(m.raw)["t"] == T.STREAMING_CHUNK for m in await bus.history(wf))

    try:
        streaming = activity_settings.model_copy(update={"llm_streaming": True})
        acts = AgentActivities(bus, None, llm, settings=streaming)
        turn = asyncio.create_task(
            environment.run(acts.llm_turn, LlmTurnInput(execution=execution, turn=1, messages=[]))
        )
        # The model pauses after its first token: that token goes out on the 16 ms
        # window while the rest is still being written.
        await eventually(
            first_chunk_posted, what="the first token's chunk", alive=lambda: not turn.done()
        )
        release.set()
        result = await turn
        messages = [orjson.loads(m.raw) for m in await bus.history(wf)]
    finally:
        server.paused = None
        release.set()
        await llm.close()
        await bus.delete_stream(wf)
        await bus.close()

    assert result.final and result.message.content == STREAMED_ANSWER
    chunks = [m for m in messages if m["t"] == T.STREAMING_CHUNK]
    assert len(chunks) >= 2
    assert [m["t"] for m in messages] == [T.STREAMING_CHUNK] * len(chunks) + [T.ANSWER]
    assert "".join(c.get("m", "") for c in chunks) == STREAMED_ANSWER
    assert chunks[-1]["f"] == 1 and all("f" not in c for c in chunks[:-1])
    assert {m["i"] for m in messages} == {"a.1.t1"}
    assert messages[-1]["d"]["usage"] == {"prompt_tokens": 31, "completion_tokens": 9}
