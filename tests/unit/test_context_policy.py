"""The context policy's cut (spindle.worker.llm.context_policy): property-style over
many random conversations, a cut never separates a tool call from its results,
always keeps the latest user message and drops no more than it must."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spindle.shared.contracts.memory import ContextPolicy, ContextStrategy, estimate_tokens
from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.platform.settings import Settings
from spindle.worker.llm.context_policy import can_cut_before, cut_point, resolve_policy

pytestmark = pytest.mark.unit


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[str], list[int]]:
    """Roles and token counts of a well-formed conversation: user messages, assistant
    replies, and assistant tool calls each followed by all their results."""
    roles: list[str] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["user", "answer", "calls"]))
        if kind == "user":
            roles.append("user")
        elif kind == "answer":
            roles.append("assistant")
        else:
            roles.append("assistant")
            roles += ["tool"] * draw(st.integers(1, 4))
    tokens = [draw(st.integers(1, 300)) for _ in roles]
    return roles, tokens


@settings(max_examples=400, deadline=None)
@given(conversations(), st.integers(0, 3000))
def test_a_window_never_splits_a_tool_call_from_its_results(
    conversation: tuple[list[str], list[int]], budget: int
) -> None:
    roles, tokens = conversation
    cut = cut_point(tokens, roles, budget)
    kept = roles[cut:]
    assert 0 <= cut <= len(roles)
    # Never a tool result whose call was dropped, never a call whose results were.
    assert not kept or kept[0] != "tool"
    assert can_cut_before(roles, cut)
    if "user" in roles:
        latest = max(i for i, r in enumerate(roles) if r == "user")
        assert cut <= latest, "the latest user message is always kept"
    if sum(tokens[cut:]) > budget:
        # Over the budget only when no allowed cut would fit: it kept the least it may.
        limit = max((i for i, r in enumerate(roles) if r == "user"), default=len(roles) - 1)
        deeper = [i for i in range(cut + 1, max(limit, 0) + 1) if can_cut_before(roles, i)]
        assert deeper == []
    else:
        # Minimal: no shallower allowed cut fits.
        assert all(sum(tokens[i:]) > budget for i in range(cut) if can_cut_before(roles, i))


def test_a_conversation_under_its_budget_is_kept_whole() -> None:
    roles = ["user", "assistant", "tool", "tool", "assistant"]
    assert cut_point([10] * 5, roles, 50) == 0
    assert cut_point([], [], 0) == 0


def test_the_cut_lands_after_the_tool_results() -> None:
    roles = ["user", "assistant", "tool", "tool", "user", "assistant"]
    tokens = [10, 10, 10, 10, 10, 10]
    # 30 tokens: the rest after cutting at 3 would be 30, but 3 is a tool result.
    assert cut_point(tokens, roles, 30) == 4


def test_the_policy_defaults_are_the_settings() -> None:
    defaults = Settings()
    policy = resolve_policy(None, defaults)
    assert policy.max_tokens == defaults.agent_context_max_tokens == 100_000
    assert policy.strategy == ContextStrategy.WINDOW
    partial = resolve_policy(ContextPolicy(strategy=ContextStrategy.SUMMARIZE), defaults)
    assert (partial.max_tokens, partial.strategy) == (100_000, ContextStrategy.SUMMARIZE)
    params = AgentParams.model_validate({"context": {"max_tokens": 1000}, "memory": "per_visit"})
    assert resolve_policy(params.context, defaults).max_tokens == 1000
    with pytest.raises(ValueError, match="max_tokens"):
        AgentParams.model_validate({"context": {"max_tokens": 10}})
    with pytest.raises(ValueError, match="memory"):
        AgentParams.model_validate({"memory": "forever"})


def test_tokens_are_estimated_from_the_text() -> None:
    assert estimate_tokens({"content": "x" * 400}) == 104
    calls = [{"id": "c1", "name": "calculator", "arguments": {"expression": "1 + 2"}}]
    assert estimate_tokens({"content": None, "tool_calls": calls}) > 4
