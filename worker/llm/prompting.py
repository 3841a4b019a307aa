"""The opening messages of an agent node's conversation.

Pure functions of the node's resolved params and the run state, so the workflow
(sandboxed, deterministic) and the ``llm_turn`` activity build the same thing.
"""

from __future__ import annotations

from typing import Any

import orjson

from spindle.shared.graphs.node_params import AgentParams
from spindle.worker.contracts import ChatMessage


def default_prompt(state: dict[str, Any]) -> str:
    """The user message when the node sets none: ``_previous``, else ``input``."""
    value = state["_previous"] if "_previous" in state else state.get("input")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        only = next(iter(value.values()))
        if isinstance(only, str):
            return only
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


def initial_messages(params: AgentParams, state: dict[str, Any]) -> list[ChatMessage]:
    """System instructions then the user prompt (params already rendered)."""
    prompt = params.prompt if params.prompt is not None else default_prompt(state)
    return [
        ChatMessage(role="system", content=params.instructions),
        ChatMessage(role="user", content=prompt),
    ]


def with_opening(
    params: AgentParams, state: dict[str, Any], messages: list[ChatMessage]
) -> list[ChatMessage]:
    """``messages`` with the system/user opening added where it is missing.

    The workflow may keep only the turns' own messages in its history; the
    opening is rebuilt here so every LLM call sees the whole conversation.
    """
    opening = initial_messages(params, state)
    has_user = any(m.role == "user" for m in messages)
    # A named system message is a notice (an upload, a child's report), not the prompt.
    has_system = any(m.role == "system" and not m.name for m in messages)
    if not has_user:
        return (
            [opening[0], opening[1], *messages]
            if not has_system
            else [
                *[m for m in messages if m.role == "system"],
                opening[1],
                *[m for m in messages if m.role != "system"],
            ]
        )
    if not has_system:
        return [opening[0], *messages]
    return list(messages)
