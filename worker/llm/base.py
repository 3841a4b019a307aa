"""The LLM provider interface used by the ``llm_turn`` activity.

A provider takes the chat so far plus the tools on offer and returns the next
assistant message: either tool calls (the agent loop continues) or a final
answer. Providers are plain async objects; retries and timeouts are Temporal's.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from shared.settings import Settings
from worker.activities.models import ChatMessage


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


class LlmConfigError(ValueError):
    """The settings do not describe a usable provider."""


class LlmAuthenticationError(RuntimeError):
    """The provider refused the credentials. Retrying cannot help: the class name
    is a non-retryable error type of ``worker.policies.LLM_RETRY``."""


class LlmRequestRejected(RuntimeError):
    """The provider rejected the request itself (HTTP 400/404/422: unknown model,
    bad tool schema). Not retryable either."""


def provider_from_settings(settings: Settings) -> LlmProvider:
    """The provider named by ``settings.llm_provider`` (``offline`` needs nothing)."""
    if settings.llm_provider == "openai":
        from worker.llm.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider.from_settings(settings)
    from worker.llm.offline import OfflineProvider

    return OfflineProvider()
