"""The streaming side of the LLM provider interface, with the offline model."""

from __future__ import annotations

import pytest

from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage
from spindle.worker.llm.base import (
    LlmRequest,
    LlmResponse,
    LlmStreamEvent,
    StreamingLlmProvider,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    stream_events,
)
from spindle.worker.llm.offline import OfflineProvider, offline_tokens
from spindle.worker.llm.providers import provider_from_settings

pytestmark = pytest.mark.unit

CALCULATOR = ToolSpec(
    name="calculator",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


async def collect(llm: object, request: LlmRequest) -> list[LlmStreamEvent]:
    assert isinstance(llm, StreamingLlmProvider)
    return [event async for event in llm.stream(request)]


def test_tokens_are_words_that_join_back_exactly() -> None:
    text = 'Answer to "what is 2 + 2":\n- calculator:  4 '
    tokens = offline_tokens(text)
    assert "".join(tokens) == text
    assert tokens[:3] == ["Answer", " to", ' "what']
    assert offline_tokens("") == []


async def test_offline_answer_streams_word_by_word_then_the_response() -> None:
    llm = OfflineProvider()
    request = LlmRequest(messages=[ChatMessage(role="user", content="Say something nice")])
    events = await collect(llm, request)

    *deltas, response = events
    assert isinstance(response, LlmResponse)
    assert response == llm.respond(request)
    assert all(isinstance(d, TextDelta) for d in deltas)
    assert len(deltas) > 3
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == response.message.content


async def test_offline_tool_turn_streams_its_calls() -> None:
    llm = OfflineProvider()
    request = LlmRequest(
        messages=[ChatMessage(role="user", content="What is 6 * 7?")], tools=[CALCULATOR]
    )
    events = await collect(llm, request)
    response = events[-1]
    assert isinstance(response, LlmResponse) and not response.final
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert calls == [
        ToolCallDelta(
            0, id="call_1_calculator", name="calculator", arguments='{"expression":"6 * 7"}'
        )
    ]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == response.message.content == "I will use calculator to answer."


async def test_a_provider_without_stream_yields_its_response_only() -> None:
    class Plain:
        name = "plain"

        async def complete(self, request: LlmRequest) -> LlmResponse:
            return LlmResponse(message=ChatMessage(role="assistant", content="whole"))

    events = [e async for e in stream_events(Plain(), LlmRequest(messages=[]))]
    assert events == [LlmResponse(message=ChatMessage(role="assistant", content="whole"))]


def test_offline_pacing_comes_from_the_settings() -> None:
    llm = provider_from_settings(Settings(llm_provider="offline", offline_token_delay_ms=20))
    assert isinstance(llm, OfflineProvider) and llm.token_delay == pytest.approx(0.02)
    assert OfflineProvider().token_delay == 0
    with pytest.raises(ValueError, match="token_delay"):
        OfflineProvider(token_delay=-1)
