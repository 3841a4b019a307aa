"""An OpenAI-compatible chat provider (OpenAI, vLLM, Ollama, any compatible proxy).

Uses the ``openai`` package's ``AsyncOpenAI`` with function-calling tools. The
client's own retries are off: Temporal retries the ``llm_turn`` activity with the
``LLM_RETRY`` policy, so a failure is visible in the run's history.

``stream`` asks for ``stream=True`` (server-sent chunks): text and tool-call
deltas are yielded as they come, tool calls are assembled from their pieces by
index, and usage is read from the last chunk when the server sends it
(``stream_options.include_usage``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import openai
import orjson
from openai import AsyncOpenAI

from spindle.shared.contracts.errors import LlmAuthenticationError, LlmRequestRejected
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import (
    LlmConfigError,
    LlmRequest,
    LlmResponse,
    LlmStreamEvent,
    LlmUsage,
    TextDelta,
    ToolCallDelta,
)

logger = logging.getLogger(__name__)

# Local servers (vLLM, Ollama) need no key but the client insists on one.
_PLACEHOLDER_KEY = "not-needed"


def to_openai_message(message: ChatMessage) -> dict[str, Any]:
    """One chat message in the wire shape of ``chat.completions``."""
    out: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        out["content"] = message.content
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": orjson.dumps(call.arguments).decode(),
                },
            }
            for call in message.tool_calls
        ]
    else:
        out["content"] = message.content or ""
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    if message.name and message.role in ("user", "system"):
        out["name"] = message.name
    return out


def _parse_arguments(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # Keep what the model said so the tool call fails with a readable error.
        return {"_unparsed_arguments": text}
    return value if isinstance(value, dict) else {"value": value}


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """Turn the provider's refusals into the non-retryable errors of ``base``."""
    try:
        yield
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise LlmAuthenticationError(f"LLM provider refused the credentials: {exc}") from exc
    except (
        openai.BadRequestError,
        openai.NotFoundError,
        openai.UnprocessableEntityError,
    ) as exc:
        raise LlmRequestRejected(f"LLM provider rejected the request: {exc}") from exc


class _ToolCallParts:
    """The pieces of one streamed tool call."""

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []

    def call(self, index: int) -> ToolCall:
        return ToolCall(
            id=self.id or f"call_{index}",
            name=self.name,
            arguments=_parse_arguments("".join(self.arguments)),
        )


class OpenAICompatProvider:
    """Chat completions against any OpenAI-compatible endpoint."""

    name = "openai"

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        client: AsyncOpenAI | None = None,
        stream_usage: bool = True,
    ) -> None:
        self.model = model
        self.stream_usage = stream_usage
        self.client = client or AsyncOpenAI(
            api_key=api_key or _PLACEHOLDER_KEY,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAICompatProvider:
        if not settings.openai_api_key and not settings.openai_base_url:
            raise LlmConfigError(
                "SPINDLE_LLM_PROVIDER=openai needs OPENAI_API_KEY (api.openai.com) or "
                "OPENAI_BASE_URL (a compatible server)"
            )
        return cls(
            model=settings.openai_model,
            base_url=settings.openai_base_url,
            api_key=settings.openai_api_key,
            stream_usage=settings.openai_stream_usage,
        )

    def build_request(self, request: LlmRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for a request."""
        kwargs: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": [to_openai_message(m) for m in request.messages],
        }
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        return kwargs

    async def complete(self, request: LlmRequest) -> LlmResponse:
        with _refusals():
            completion: Any = await self.client.chat.completions.create(
                **self.build_request(request)
            )
        if not completion.choices:
            raise RuntimeError("the model returned no choices")
        choice = completion.choices[0].message
        calls = [
            ToolCall(
                id=call.id,
                name=call.function.name,
                arguments=_parse_arguments(call.function.arguments),
            )
            for call in (choice.tool_calls or [])
            if getattr(call, "function", None) is not None
        ]
        usage = None
        if completion.usage is not None:
            usage = LlmUsage(
                prompt_tokens=completion.usage.prompt_tokens or 0,
                completion_tokens=completion.usage.completion_tokens or 0,
            )
        return LlmResponse(
            message=ChatMessage(role="assistant", content=choice.content, tool_calls=calls),
            model=completion.model or request.model or self.model,
            usage=usage,
        )

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamEvent]:
        """Deltas as the server streams them, then the assembled response."""
        kwargs = self.build_request(request)
        kwargs["stream"] = True
        if self.stream_usage:
            kwargs["stream_options"] = {"include_usage": True}
        with _refusals():
            chunks: Any = await self.client.chat.completions.create(**kwargs)
        text: list[str] = []
        calls: dict[int, _ToolCallParts] = {}
        usage: LlmUsage | None = None
        model = ""
        choices_seen = False
        try:
            async for chunk in chunks:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = LlmUsage(
                        prompt_tokens=chunk.usage.prompt_tokens or 0,
                        completion_tokens=chunk.usage.completion_tokens or 0,
                    )
                if not chunk.choices:
                    continue  # the usage-only last chunk
                choices_seen = True
                delta = chunk.choices[0].delta
                if delta.content:
                    text.append(delta.content)
                    yield TextDelta(delta.content)
                for piece in delta.tool_calls or []:
                    parts = calls.setdefault(piece.index, _ToolCallParts())
                    function = piece.function
                    name = function.name if function is not None else None
                    arguments = (function.arguments if function is not None else None) or ""
                    parts.id = piece.id or parts.id
                    parts.name = name or parts.name
                    parts.arguments.append(arguments)
                    yield ToolCallDelta(piece.index, id=piece.id, name=name, arguments=arguments)
        finally:
            await chunks.close()
        if not choices_seen:
            raise RuntimeError("the model returned no choices")
        tool_calls = [calls[index].call(index) for index in sorted(calls) if calls[index].name]
        yield LlmResponse(
            message=ChatMessage(
                role="assistant", content="".join(text) or None, tool_calls=tool_calls
            ),
            model=model or request.model or self.model,
            usage=usage,
        )

    async def close(self) -> None:
        await self.client.close()
