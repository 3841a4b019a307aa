"""The deterministic offline model (spindle.worker.llm.offline)."""

from __future__ import annotations

import orjson
import pytest

from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage
from spindle.worker.llm.base import LlmRequest, ToolSpec
from spindle.worker.llm.offline import OfflineProvider, derive_arguments, find_expression
from spindle.worker.llm.prompting import initial_messages, with_opening
from spindle.worker.llm.providers import provider_from_settings
from spindle.worker.offerings import load_tools

pytestmark = pytest.mark.unit


def spec(name: str) -> ToolSpec:
    tool = load_tools()[name]
    return ToolSpec(name=name, description=tool.description, parameters=tool.params_schema())


def conversation(prompt: str) -> list[ChatMessage]:
    return [
        ChatMessage(role="system", content="be brief"),
        ChatMessage(role="user", content=prompt),
    ]


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("what is 12 * (3 + 4)?", "12 * (3 + 4)"),
        ("compute 2^10 please", "2^10"),
        ("45 * 12 seats", "45 * 12"),
        ("version 3 of the plan", None),
        ("no numbers here", None),
    ],
)
def test_find_expression(text: str, expression: str | None) -> None:
    assert find_expression(text) == expression


def test_arguments_come_from_the_prompt() -> None:
    assert derive_arguments(spec("calculator"), "what is 6 * 7?") == {"expression": "6 * 7"}
    assert derive_arguments(spec("calculator"), "tell me about redis") is None
    assert derive_arguments(spec("search_notes"), "redis lists") == {"query": "redis lists"}
    number = ToolSpec(
        name="n",
        parameters={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    assert derive_arguments(number, "give me 3 things") == {"n": 3}
    assert derive_arguments(number, "give me things") is None


async def test_first_turn_calls_the_relevant_tools_then_answers_from_results() -> None:
    llm = OfflineProvider()
    tools = [spec("search_notes"), spec("calculator")]
    messages = conversation("What does the starter plan cost for 4 seats, 20 * 4?")
    first = await llm.complete(LlmRequest(messages=messages, tools=tools))
    assert not first.final
    assert [(c.id, c.name, c.arguments) for c in first.message.tool_calls] == [
        (
            "call_1_search_notes",
            "search_notes",
            {"query": "What does the starter plan cost for 4 seats, 20 * 4?"},
        ),
        ("call_2_calculator", "calculator", {"expression": "20 * 4"}),
    ]
    results = []
    for call in first.message.tool_calls:
        value = await load_tools()[call.name].call(call.arguments)
        results.append(
            ChatMessage(role="tool", tool_call_id=call.id, content=orjson.dumps(value).decode())
        )
    second = await llm.complete(
        LlmRequest(messages=[*messages, first.message, *results], tools=tools)
    )
    assert second.final
    text = second.message.content or ""
    assert "20 * 4 = 80" in text
    assert "Pricing: The starter plan costs 20 dollars" in text


async def test_same_input_same_output() -> None:
    llm = OfflineProvider()
    request = LlmRequest(messages=conversation("sum 1 + 2"), tools=[spec("calculator")])
    assert (await llm.complete(request)) == (await llm.complete(request))


async def test_without_relevant_tools_it_answers_at_once() -> None:
    llm = OfflineProvider()
    plain = await llm.complete(LlmRequest(messages=conversation("hello there")))
    assert plain.final and "hello there" in (plain.message.content or "")
    irrelevant = await llm.complete(
        LlmRequest(messages=conversation("hello there"), tools=[spec("calculator")])
    )
    assert irrelevant.final


async def test_tool_errors_are_reported_in_the_answer() -> None:
    llm = OfflineProvider()
    messages = conversation("1 / 0")
    first = await llm.complete(LlmRequest(messages=messages, tools=[spec("calculator")]))
    [call] = first.message.tool_calls
    failed = ChatMessage(
        role="tool", tool_call_id=call.id, name="calculator", content='{"error":"division by zero"}'
    )
    second = await llm.complete(
        LlmRequest(messages=[*messages, first.message, failed], tools=[spec("calculator")])
    )
    assert "calculator failed: division by zero" in (second.message.content or "")


def test_opening_messages() -> None:
    params = AgentParams(instructions="be kind", prompt=None)
    assert [m.content for m in initial_messages(params, {"input": {"q": "hi"}})] == [
        "be kind",
        "hi",
    ]
    assert initial_messages(params, {"input": "x", "_previous": [1]})[1].content == "[1]"
    reply = ChatMessage(role="assistant", content="ok")
    full = with_opening(params, {"input": "hi"}, [reply])
    assert [m.role for m in full] == ["system", "user", "assistant"]
    kept = conversation("mine")
    assert with_opening(params, {"input": "hi"}, kept) == kept


def test_provider_from_settings() -> None:
    assert provider_from_settings(Settings(llm_provider="offline")).name == "offline"
    openai = provider_from_settings(
        Settings(llm_provider="openai", openai_base_url="http://127.0.0.1:1/v1")
    )
    assert openai.name == "openai"
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        provider_from_settings(
            Settings(llm_provider="openai", openai_base_url=None, openai_api_key=None)
        )
