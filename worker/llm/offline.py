"""A deterministic offline "model" for demos and tests: no API key, no network.

Behaviour, always the same for the same input:

1. When tools are offered and none has answered since the last user message, it
   calls every *relevant* tool with arguments taken from that message: the
   ``calculator`` (any tool with a required ``expression``) when the message holds
   an arithmetic expression; any other tool whose required parameters it can fill
   (strings get the message text, numbers the first number in it, a ``tasks``
   list one task in progress: the message, shortened).
2. Otherwise it answers with text built from the tool results (or, with none, a
   restatement of the request), followed by the reports of ended workstreams it
   was given since that message (``system`` messages starting
   ``[workstream result]``, docs/workstreams.md), so a lead "answers from" them.

``stream`` yields the same reply token by token (a token is a word with the
whitespace before it), pausing ``token_delay`` seconds before each one so that
demos and benchmarks see a paced stream; 0 (the default) does not pause.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

import orjson

from spindle.shared.contracts.workstreams import WORKSTREAM_REPORT_PREFIX
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import (
    LlmRequest,
    LlmResponse,
    LlmStreamEvent,
    LlmUsage,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)

_ARITHMETIC = re.compile(r"[-+(]*\s*\d[\d.\s]*(?:[-+*/%^]+\s*[(\s]*\d[\d.\s)]*)+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_SUMMARY_CHARS = 300
_TOKEN = re.compile(r"\s*\S+|\s+")


def offline_tokens(text: str) -> list[str]:
    """``text`` cut into word tokens that concatenate back to it exactly."""
    return _TOKEN.findall(text)


def find_expression(text: str) -> str | None:
    """The longest arithmetic expression in a text (``"12 * (3 + 4)"``), if any."""
    candidates = [m.group(0).strip() for m in _ARITHMETIC.finditer(text)]
    candidates = [c for c in candidates if re.search(r"\d\s*[-+*/%^]", c)]
    if not candidates:
        return None
    best = max(candidates, key=len)
    # Balance parentheses the regex may have cut.
    opened = best.count("(") - best.count(")")
    if opened > 0:
        best += ")" * opened
    elif opened < 0:
        best = best.rstrip(")") if best.count("(") == 0 else best
    return best


def _required(tool: ToolSpec) -> tuple[list[str], dict[str, Any]]:
    props = tool.parameters.get("properties") or {}
    return list(tool.parameters.get("required") or []), props


def derive_arguments(tool: ToolSpec, prompt: str) -> dict[str, Any] | None:
    """Arguments for ``tool`` taken from ``prompt``, or None if it is not relevant."""
    required, props = _required(tool)
    if "expression" in required:
        expression = find_expression(prompt)
        return None if expression is None else {"expression": expression}
    args: dict[str, Any] = {}
    for name in required:
        kind = (props.get(name) or {}).get("type")
        if kind == "string" or kind is None:
            args[name] = prompt
        elif kind == "array" and name == "tasks":
            # A plan tool (``update_plan``): the request is the one task in progress.
            args[name] = [{"title": _shorten(prompt, 80), "status": "in_progress"}]
        elif kind in ("integer", "number"):
            match = _NUMBER.search(prompt)
            if match is None:
                return None
            number = float(match.group(0))
            args[name] = int(number) if kind == "integer" else number
        else:
            return None
    return args


def _summarize_result(name: str, content: str | None, calls: dict[str, ToolCall]) -> str:
    try:
        value = orjson.loads(content or "null")
    except orjson.JSONDecodeError:
        value = content
    if isinstance(value, dict) and "error" in value and len(value) <= 2:
        return f"{name} failed: {value['error']}"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        lines = [f"{v.get('title') or v.get('id') or '?'}: {v.get('text', '')}" for v in value]
        return f"{name} found {len(value)}:\n" + "\n".join(f"- {line}" for line in lines)
    if isinstance(value, list) and not value:
        return f"{name} found nothing."
    if isinstance(value, int | float) and name in calls:
        expression = calls[name].arguments.get("expression")
        if expression:
            return f"{expression} = {value}"
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    if len(text) > _SUMMARY_CHARS:
        text = text[: _SUMMARY_CHARS - 1] + "…"
    return f"{name}: {text}"


class OfflineProvider:
    """Deterministic stand-in for an LLM (see the module docstring)."""

    name = "offline"

    def __init__(self, *, token_delay: float = 0.0) -> None:
        if token_delay < 0:
            raise ValueError("token_delay must not be negative")
        self.token_delay = token_delay

    async def complete(self, request: LlmRequest) -> LlmResponse:
        return self.respond(request)

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamEvent]:
        """The reply of ``respond``, token by token, then its tool calls and itself."""
        response = self.respond(request)
        for token in offline_tokens(response.message.content or ""):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            yield TextDelta(token)
        for index, call in enumerate(response.message.tool_calls):
            yield ToolCallDelta(
                index, id=call.id, name=call.name, arguments=orjson.dumps(call.arguments).decode()
            )
        yield response

    def respond(self, request: LlmRequest) -> LlmResponse:
        messages = request.messages
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        prompt = (messages[last_user].content or "") if last_user >= 0 else ""
        since = messages[last_user + 1 :]
        results = [m for m in since if m.role == "tool"]
        asked = any(m.role == "assistant" and m.tool_calls for m in since)

        if request.tools and not results and not asked:
            calls: list[ToolCall] = []
            for tool in request.tools:
                args = derive_arguments(tool, prompt)
                if args is not None:
                    calls.append(
                        ToolCall(
                            id=f"call_{len(calls) + 1}_{tool.name}", name=tool.name, arguments=args
                        )
                    )
            if calls:
                names = ", ".join(c.name for c in calls)
                return self._reply(request, f"I will use {names} to answer.", calls)

        if results:
            made: dict[str, ToolCall] = {}
            by_id: dict[str, ToolCall] = {}
            for m in since:
                for call in m.tool_calls:
                    made.setdefault(call.name, call)
                    by_id[call.id] = call
            parts = []
            for m in results:
                found = by_id.get(m.tool_call_id or "")
                name = m.name or (found.name if found else "tool")
                parts.append(_summarize_result(name, m.content, made))
            text = f'Answer to "{_shorten(prompt)}":\n' + "\n".join(parts)
        else:
            text = f'(offline model) You asked: "{_shorten(prompt)}".'
        heard = [
            m.content or ""
            for m in since
            if m.role == "system" and (m.content or "").startswith(WORKSTREAM_REPORT_PREFIX)
        ]
        if heard:
            text += "\nFrom the workstreams:\n" + "\n".join(
                _shorten(h[len(WORKSTREAM_REPORT_PREFIX) :], _SUMMARY_CHARS * 2) for h in heard
            )
        return self._reply(request, text, [])

    def _reply(self, request: LlmRequest, text: str, calls: list[ToolCall]) -> LlmResponse:
        prompt_tokens = sum(len((m.content or "").split()) for m in request.messages)
        return LlmResponse(
            message=ChatMessage(role="assistant", content=text, tool_calls=calls),
            model="offline",
            usage=LlmUsage(prompt_tokens=prompt_tokens, completion_tokens=len(text.split())),
        )


def _shorten(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
