"""An agent's structured final answer: ``params.output_schema`` (docs/graphs/node-types.md).

The ``llm_turn`` activity tells the model the schema (a note after the system
message of the request, not stored in the conversation), checks a final answer
against it, and on a violation asks once more in the same activity, giving the
model its answer and the violations. A second violation fails the node with
``AgentOutputInvalid`` naming each one. A fitting answer's content becomes its
canonical JSON text, which ``run_agent`` parses into the node's output.
"""

from __future__ import annotations

import json
import re
from typing import Any

from spindle.shared.contracts.errors import AgentOutputInvalid
from spindle.shared.graphs.graph_errors import schema_errors
from spindle.worker.contracts import ChatMessage

# A model often wraps JSON in a Markdown fence despite being told not to.
_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)


def schema_note(schema: dict[str, Any]) -> str:
    """What the model is told about the answer's shape."""
    return (
        "When you give your final answer (no more tool calls), answer with JSON only, "
        "no prose and no Markdown fence, that fits this JSON Schema:\n"
        + json.dumps(schema, sort_keys=True)
    )


def with_schema_note(messages: list[ChatMessage], schema: dict[str, Any]) -> list[ChatMessage]:
    """``messages`` with the schema note as a system message after the first system one."""
    note = ChatMessage(role="system", content=schema_note(schema))
    at = 1 if messages and messages[0].role == "system" else 0
    return [*messages[:at], note, *messages[at:]]


def answer_problems(schema: dict[str, Any], text: str) -> tuple[Any, list[dict[str, Any]]]:
    """The parsed answer and its violations of ``schema`` (none: it fits).

    Each violation is an ``ErrorDetail``-shaped dict: field (``output.<path>``),
    rule (the JSON Schema keyword, or ``json_invalid``) and message.
    """
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    try:
        value = json.loads(body)
    except ValueError as exc:
        message = f"the answer is not JSON: {exc}"
        return None, [{"field": "output", "rule": "json_invalid", "message": message}]
    problems = [
        {
            "field": f"output.{path}" if path else "output",
            "rule": rule,
            "message": f"output.{path}: {message}" if path else f"output: {message}",
        }
        for path, rule, message in schema_errors(schema, value)
    ]
    return value, problems


def retry_messages(
    messages: list[ChatMessage], answer: ChatMessage, problems: list[dict[str, Any]]
) -> list[ChatMessage]:
    """The request's messages, the answer that broke the schema, and what broke."""
    listed = "\n".join(f"- {p['message']}" for p in problems)
    fix = ChatMessage(
        role="user",
        content="Your final answer does not fit the required JSON Schema:\n"
        f"{listed}\nAnswer again with JSON only that fits the schema.",
    )
    return [*messages, answer, fix]


def output_invalid(node_id: str, problems: list[dict[str, Any]]) -> AgentOutputInvalid:
    """The node's failure after the retry, naming each violation."""
    listed = "; ".join(p["message"] for p in problems)
    return AgentOutputInvalid(
        f"agent '{node_id}': the final answer does not fit params.output_schema "
        f"(after one retry): {listed}",
        errors=[{"node": node_id, **p} for p in problems],
        context={"node": node_id},
    )


def canonical(value: Any) -> str:
    """The answer's content once it fits: compact JSON that ``run_agent`` parses."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
