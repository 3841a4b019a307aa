"""The LLM provider interface used by the ``llm_turn`` activity.

A provider takes the chat so far plus the tools on offer and returns the next
assistant message: either tool calls (the agent loop continues) or a final
answer. Providers are plain async objects; retries and timeouts are Temporal's.

A provider that can stream also implements ``StreamingLlmProvider.stream``: it
yields ``TextDelta`` and ``ToolCallDelta`` events as the model produces them and
ends with the assembled ``LlmResponse``. ``stream_events`` gives that event
stream for any provider (one without ``stream`` yields just its response).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, Field

from spindle.worker.contracts import ChatMessage


class ToolSpec(BaseModel):
    """A tool as the model sees it: name, description and JSON Schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})


class LlmRequest(BaseModel):
    messages: list[ChatMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    model: str | None = None
    temperature: float | None = None


class LlmUsage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LlmResponse(BaseModel):
    """The assistant's next message (``role == "assistant"``)."""

    message: ChatMessage
    model: str = ""
    usage: LlmUsage | None = None

    @property
    def final(self) -> bool:
        return not self.message.tool_calls


@runtime_checkable
class LlmProvider(Protocol):
    """Anything that can produce the next assistant message."""

    name: str

    async def complete(self, request: LlmRequest) -> LlmResponse: ...


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant's text, in order (one token or a few)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call: ``index`` says which call of the message.

    The first delta of a call usually carries ``id`` and ``name``; ``arguments``
    pieces concatenate to the call's JSON arguments.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


LlmStreamEvent: TypeAlias = TextDelta | ToolCallDelta | LlmResponse
"""What ``stream`` yields: deltas, then exactly one ``LlmResponse`` last."""


@runtime_checkable
class StreamingLlmProvider(LlmProvider, Protocol):
    """A provider that can also stream its reply."""

    def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamEvent]:
        """Deltas as the model produces them, then the assembled response."""
        ...


async def stream_events(llm: LlmProvider, request: LlmRequest) -> AsyncIterator[LlmStreamEvent]:
    """The event stream of ``llm`` for ``request``: its own when it streams, else
    just the response of ``complete``."""
    if isinstance(llm, StreamingLlmProvider):
        events = llm.stream(request)
        try:
            async for event in events:
                yield event
        finally:
            # Closed with this generator: the provider's connection is let go at once.
            closing = getattr(events, "aclose", None)
            if closing is not None:
                await closing()
        return
    yield await llm.complete(request)


class LlmConfigError(ValueError):
    """The settings do not describe a usable provider."""
