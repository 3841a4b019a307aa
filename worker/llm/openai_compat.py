"""An OpenAI-compatible chat provider (OpenAI, vLLM, Ollama, any compatible proxy).

Uses the ``openai`` package's ``AsyncOpenAI`` with function-calling tools. The
client's own retries are off: Temporal retries the ``llm_turn`` activity with the
``LLM_RETRY`` policy, so a failure is visible in the run's history.
"""

from __future__ import annotations

import logging
from typing import Any

import openai
import orjson
from openai import AsyncOpenAI

from shared.settings import Settings
from worker.activities.models import ChatMessage, ToolCall
from worker.llm.base import (
    LlmAuthenticationError,
    LlmConfigError,
    LlmRequest,
    LlmRequestRejected,
    LlmResponse,
    LlmUsage,
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
    ) -> None:
        self.model = model
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
        try:
            completion: Any = await self.client.chat.completions.create(
                **self.build_request(request)
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise LlmAuthenticationError(f"LLM provider refused the credentials: {exc}") from exc
        except (
            openai.BadRequestError,
            openai.NotFoundError,
            openai.UnprocessableEntityError,
        ) as exc:
            raise LlmRequestRejected(f"LLM provider rejected the request: {exc}") from exc
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

    async def close(self) -> None:
        await self.client.close()
