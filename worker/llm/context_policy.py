"""The context policy: what part of a stored conversation the model is given (pure).

A conversation over its ``max_tokens`` (estimated: ``spindle.shared.contracts.memory.
estimate_tokens``) is cut at an *exchange boundary*: before a message that is not a
tool result, so a tool call is never kept or dropped without its results. The
latest user message and everything after it are always kept (even when they alone
exceed ``max_tokens``), and so are the system message and the summary, which are
not part of the stored log. ``window`` drops what is cut; ``summarize`` cuts
deeper (down to half of ``max_tokens``, so a summary is not written every turn)
and has the model summarize what it drops (docs/conversations.md, Memory).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spindle.shared.contracts.memory import ContextPolicy, ContextStrategy
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage

SUMMARY_HEADER = "Summary of the earlier conversation"
SUMMARY_INSTRUCTIONS = (
    "You write the memory of a conversation whose oldest messages no longer fit. "
    "Summarize the earlier summary (if any) and the messages below in a few short "
    "paragraphs: facts, decisions, open questions, names, numbers and results of "
    "tools. Write only the summary."
)
# Characters of one message given to the summarizer (a huge tool result is cut).
SUMMARY_MESSAGE_CHARS = 4000


@dataclass(frozen=True)
class Policy:
    """A resolved context policy (params over settings)."""

    max_tokens: int
    strategy: ContextStrategy


def resolve_policy(context: ContextPolicy | None, settings: Settings) -> Policy:
    """``params.context`` with the settings' defaults for what it leaves unset."""
    max_tokens = context.max_tokens if context is not None else None
    strategy = context.strategy if context is not None else None
    return Policy(
        max_tokens=max_tokens or settings.agent_context_max_tokens,
        strategy=strategy or ContextStrategy(settings.agent_context_strategy),
    )


def can_cut_before(roles: Sequence[str], index: int) -> bool:
    """True if the log may start at ``index``: not in the middle of a tool call's results."""
    return index >= len(roles) or roles[index] != "tool"


def cut_point(tokens: Sequence[int], roles: Sequence[str], budget: int) -> int:
    """How many of the oldest messages to drop so the rest fits ``budget`` tokens.

    The smallest exchange boundary whose remainder fits; when none does before
    the latest user message, the deepest boundary at or before it (that message
    and what follows are always kept). 0: nothing to drop.
    """
    count = len(tokens)
    users = [i for i, role in enumerate(roles) if role == "user"]
    limit = users[-1] if users else max(count - 1, 0)
    remaining = sum(tokens)
    deepest = 0
    for index in range(limit + 1):
        if can_cut_before(roles, index):
            if remaining <= budget:
                return index
            deepest = index
        if index < count:
            remaining -= tokens[index]
    return deepest


def summary_message(summary: str, covered: int) -> ChatMessage:
    """The summary as the model sees it: a system message after the instructions."""
    return ChatMessage(role="system", content=f"{SUMMARY_HEADER} ({covered} messages):\n{summary}")


def summary_request(previous: str | None, dropped: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The messages of the summarizing LLM turn: instructions, then the text to summarize."""
    lines: list[str] = []
    if previous:
        lines += ["Earlier summary:", previous, ""]
    lines.append("Messages:")
    for message in dropped:
        text = message.content or ""
        if message.tool_calls:
            text += " [calls: " + ", ".join(c.name for c in message.tool_calls) + "]"
        if len(text) > SUMMARY_MESSAGE_CHARS:
            text = text[: SUMMARY_MESSAGE_CHARS - 1] + "…"
        label = message.role if message.name is None else f"{message.role} {message.name}"
        lines.append(f"[{label}] {text}")
    return [
        ChatMessage(role="system", content=SUMMARY_INSTRUCTIONS),
        ChatMessage(role="user", content="\n".join(lines)),
    ]
