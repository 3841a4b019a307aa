"""The tool registry and the built-in tools (spindle.worker.tools)."""

from __future__ import annotations

import pytest

from spindle.worker.offerings import load_tools
from spindle.worker.tools.registry import ToolError, get_tool, tool

pytestmark = pytest.mark.unit


async def test_signature_becomes_a_validated_params_model() -> None:
    @tool(name="test_greet")
    async def greet(name: str, times: int = 1, loud: bool = False) -> str:
        """Greet someone.

        Args:
            name: who to greet.
            times: how many times.
            loud: shout it.
        """
        text = " ".join([f"hello {name}"] * times)
        return text.upper() if loud else text

    registered = get_tool("test_greet")
    schema = registered.params_schema()
    assert schema["required"] == ["name"]
    assert schema["properties"]["times"] == {
        "default": 1,
        "description": "how many times.",
        "title": "Times",
        "type": "integer",
    }
    assert schema["additionalProperties"] is False
    assert registered.description == "Greet someone."
    assert registered.openai_schema()["function"]["name"] == "test_greet"
    assert await registered.call({"name": "ada", "times": 2}) == "hello ada hello ada"
    assert await registered.call({"name": "ada", "loud": True}) == "HELLO ADA"
    with pytest.raises(ToolError, match=r"times: Input should be a valid integer"):
        await registered.call({"name": "ada", "times": "lots"})
    with pytest.raises(ToolError, match=r"name: Field required"):
        await registered.call({})
    with pytest.raises(ToolError, match=r"colour: Extra inputs are not permitted"):
        await registered.call({"name": "ada", "colour": "red"})


async def test_sync_tools_work_bare_decorated() -> None:
    @tool
    def test_double(x: float) -> float:
        """Double a number."""
        return x * 2

    assert await get_tool("test_double").call({"x": 2.5}) == 5.0


def test_unknown_tool_lists_the_known_ones() -> None:
    with pytest.raises(ToolError, match=r"unknown tool 'nope' \(known: .*calculator"):
        get_tool("nope")


def test_builtins_are_registered() -> None:
    assert {
        "search_notes",
        "calculator",
        "word_count",
        "draft_document",
        "extract_keywords",
        "sentiment",
    } <= set(load_tools())


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("12 * (3 + 4) / 2", 42),
        ("2 ** 10", 1024),
        ("2^3", 8),
        ("-7 // 2", -4),
        ("10 % 4", 2),
        ("sqrt(16) + abs(-1)", 5),
        ("round(pi, 2)", 3.14),
        ("0.1 + 0.2", 0.30000000000000004),
        ("max(1, 5, 3)", 5),
    ],
)
async def test_calculator_evaluates_arithmetic(expression: str, value: float) -> None:
    assert await get_tool("calculator").call({"expression": expression}) == value


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("__import__('os').system('true')", "unsupported expression"),
        ("open('/etc/passwd')", "unsupported expression"),
        ("(1).__class__", "unsupported expression"),
        ("x + 1", "unsupported expression"),
        ("1 / 0", "division by zero"),
        ("9 ** 9999", "exponent too large"),
        ("2 +", "not an arithmetic expression"),
        ("1" * 501, "too long"),
    ],
)
async def test_calculator_refuses_anything_but_arithmetic(expression: str, error: str) -> None:
    with pytest.raises(ToolError, match=error):
        await get_tool("calculator").call({"expression": expression})


async def test_search_notes_ranks_by_matching_words() -> None:
    found = await get_tool("search_notes").call({"query": "How do I resume an SSE stream?"})
    assert found[0]["id"] == "sse"
    assert await get_tool("search_notes").call({"query": "zebra"}) == []
    limited = await get_tool("search_notes").call({"query": "redis temporal sse", "limit": 1})
    assert len(limited) == 1


async def test_text_tools() -> None:
    counts = await get_tool("word_count").call({"text": "One two. Three four five!"})
    assert counts == {"words": 5, "characters": 25, "sentences": 2}
    keywords = await get_tool("extract_keywords").call(
        {"text": "Redis streams and Redis lists; the lists are capped.", "limit": 2}
    )
    assert keywords == ["lists", "redis"]
    mood = await get_tool("sentiment").call({"text": "slow and broken, I hate it"})
    assert mood["label"] == "negative" and mood["score"] == -1.0
    draft = await get_tool("draft_document").call({"topic": "pricing", "points": 2})
    assert draft["title"].startswith("Pricing")
    assert draft["sources"][0] == "pricing"
    assert draft["body"].count("\n- ") == 1


def test_tools_used_meta_stays_bounded_over_a_long_loop() -> None:
    from spindle.worker.nodes.tool import TOOLS_USED_KEPT, tools_used_meta

    meta: dict[str, object] = {"source": "support"}
    for i in range(1, 1001):
        meta = {**meta, **tools_used_meta(meta, f"t{i}")}
    assert meta["tools_used_count"] == 1000
    assert meta["tools_used"] == [f"t{i}" for i in range(1001 - TOOLS_USED_KEPT, 1001)]
    # A meta written before the count existed counts its names.
    assert tools_used_meta({"tools_used": ["a", "b"]}, "c")["tools_used_count"] == 3
