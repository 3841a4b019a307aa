"""The OpenAI-compatible provider against a fake chat-completions server on loopback.

The fake (a small Starlette app under uvicorn) stands in for the outside world a
test cannot reach: it records each request and answers with canned completions,
first a tool call, then a final answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from spindle.processes import free_port
from tests.polling import eventually
from worker.activities.models import ChatMessage, ToolCall
from worker.llm.base import LlmAuthenticationError, LlmRequest, LlmRequestRejected, ToolSpec
from worker.llm.openai_compat import OpenAICompatProvider

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


class FakeOpenAI:
    """Records requests; replies with a tool call until a tool result is sent."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])

    async def chat(self, request: Request) -> JSONResponse:
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
