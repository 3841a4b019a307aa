"""An agent's memory: the context policy and the conversation view (docs/conversations.md, Memory).

An agent's conversation is stored by reference (``spindle.shared.store.agent_memory``)
and what the model is given each turn is decided by a *context policy*: at most
``max_tokens`` (estimated) under the ``window`` strategy (the oldest whole
exchanges are dropped) or the ``summarize`` strategy (what is dropped is
summarized by the same model). ``memory`` says whose conversation an agent
continues: its own across loop visits and, in a run that belongs to a
conversation, the thread's (every run of the conversation).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

CONTEXT_MIN_TOKENS = 256
CONTEXT_MAX_TOKENS = 10_000_000


class ContextStrategy(StrEnum):
    """How a conversation over its ``max_tokens`` is cut."""

    WINDOW = "window"
    SUMMARIZE = "summarize"


class ContextPolicy(BaseModel):
    """``params.context`` of an agent node or a workstream launch; unset fields take
    the settings ``agent_context_max_tokens`` / ``agent_context_strategy``."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: int | None = Field(
        None,
        ge=CONTEXT_MIN_TOKENS,
        le=CONTEXT_MAX_TOKENS,
        description="most (estimated) tokens the model is given per turn",
    )
    strategy: ContextStrategy | None = Field(
        None, description="window: drop the oldest exchanges; summarize: summarize them"
    )


MemoryMode = Literal["thread", "run", "per_visit", "none"]
"""``params.memory``: ``thread`` (default) continues the agent's own conversation across
loop visits and shares it with the other runs of the run's conversation; ``run``
continues across visits of this run only; ``per_visit`` and ``none`` start every
visit empty (and share nothing)."""


class MemoryMessage(BaseModel):
    """One message of the conversation the model is given."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    name: str | None = None
    tool_calls: list[dict[str, object]] = Field(default_factory=list)
    tool_call_id: str | None = None
    seq: int = Field(description="position in the stored conversation (-1: not stored)")
    ts: datetime | None = Field(None, description="when it was stored")


class ConversationView(BaseModel):
    """``GET /runs/{workflow_id}/conversation``: what the agent's next (or last) LLM turn
    is given, paged (the first page starts with the system and summary messages)."""

    node: str
    workstream: str
    memory: str = Field(description="run, thread or per_visit: whose conversation it is")
    messages: list[MemoryMessage]
    summary: str | None = Field(None, description="summary of the dropped messages, if any")
    dropped: int = Field(description="messages no longer given to the model")
    tokens: int = Field(description="estimated tokens of everything the model is given")
    total: int = Field(description="messages the model is given (all pages)")
    next_cursor: str | None = None


class MemoryInfo(BaseModel):
    """One agent's memory in a thread."""

    node: str
    messages: int = Field(description="messages stored")
    dropped: int
    summary: str | None = None


class ThreadView(BaseModel):
    """``GET /conversations/{id}``: a conversation's runs and its agents' shared memory."""

    conversation_id: str
    current: str | None = None
    runs: list[dict[str, object]]
    history: list[str]
    memory: list[MemoryInfo]


def estimate_tokens(message: dict[str, object]) -> int:
    """Estimated tokens of one chat message (a dump of ``ChatMessage``): about four
    characters a token, plus a few for the message's framing. An estimate on purpose:
    the same for every model, and computed without the model's tokenizer."""
    chars = len(str(message.get("content") or "")) + len(str(message.get("name") or ""))
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            chars += len(str(call))
    return chars // 4 + 4
