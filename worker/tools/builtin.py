"""The built-in tools: no network, so the demo runs anywhere.

``search_notes`` (a small knowledge base), ``calculator`` (safe arithmetic with
``ast``, never ``eval``), ``word_count``, ``draft_document``, ``extract_keywords``,
``sentiment``, ``read_file`` (the calling run's own files, ``run_files``) and
``update_plan`` (posts the agent's plan as a PLAN message, ``ToolContext``).
Imported by ``spindle.worker.offerings``.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from spindle.shared.contracts.errors import ToolError
from spindle.shared.contracts.messages import PlanTask
from spindle.worker.tools.context import ToolContext
from spindle.worker.tools.registry import tool
from spindle.worker.tools.run_files import read_run_file

NOTES: tuple[dict[str, str], ...] = (
    {
        "id": "temporal",
        "title": "Temporal",
        "text": "Temporal is a durable execution platform: workflows are replayed from "
        "their event history, activities do the I/O and are retried on failure.",
    },
    {
        "id": "redis-streams",
        "title": "Redis lists and pub/sub",
        "text": "A capped Redis list keeps the recent messages of a run; pub/sub "
        "delivers new ones live. Subscribe first, then replay the backlog.",
    },
    {
        "id": "sse",
        "title": "Server-sent events",
        "text": "SSE streams text/event-stream over HTTP; each event has an id so a "
        "client reconnecting with Last-Event-ID resumes without gaps.",
    },
    {
        "id": "hitl",
        "title": "Human in the loop",
        "text": "A prompt node pauses the run and asks a person for input described by "
        "a JSON Schema; invalid answers are rejected and the run keeps waiting.",
    },
    {
        "id": "jmespath",
        "title": "JMESPath",
        "text": "JMESPath is a query language for JSON: deterministic, no I/O, so it is "
        "safe for edge conditions and input mappings inside workflows.",
    },
    {
        "id": "pricing",
        "title": "Pricing",
        "text": "The starter plan costs 20 dollars per month per seat; the team plan "
        "costs 45 dollars per month per seat with a 10 percent yearly discount.",
    },
)

_WORD = re.compile(r"[A-Za-z0-9]+")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "does",
        "do",
        "can",
        "you",
        "me",
        "about",
        "tell",
    ]
)


def _terms(text: str) -> list[str]:
    return [w for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOPWORDS]


@tool
def search_notes(query: str, limit: int = 3) -> list[dict[str, Any]]:
    """Search the built-in knowledge base of notes by keywords.

    Args:
        query: words to look for.
        limit: at most this many notes, best first.
    """
    wanted = set(_terms(query))
    scored = []
    for note in NOTES:
        words = _terms(note["title"] + " " + note["text"])
        score = sum(1 for w in words if w in wanted)
        if score:
            scored.append((score, note["id"], note))
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [{**note, "score": score} for score, _, note in scored[: max(limit, 0)]]


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPRESSION = 500


def _evaluate_node(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate_node(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate_node(node.left), _evaluate_node(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 100 or abs(left) > 1e6):
            raise ToolError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate_node(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return _FUNCTIONS[node.func.id](*(_evaluate_node(a) for a in node.args))
    raise ToolError(f"unsupported expression element: {ast.dump(node)[:60]}")


@tool
def calculator(expression: str) -> int | float:
    """Evaluate an arithmetic expression (+ - * / // % **, sqrt, abs, round, min, max, pi).

    Args:
        expression: e.g. "12 * (3 + 4) / 2".
    """
    if len(expression) > _MAX_EXPRESSION:
        raise ToolError("expression too long")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from exc
    try:
        result = _evaluate_node(tree)
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    if isinstance(result, float) and result.is_integer() and abs(result) < 2**53:
        return int(result)
    return result  # type: ignore[no-any-return]


@tool
def word_count(text: str) -> dict[str, int]:
    """Count the words, characters and sentences of a text.

    Args:
        text: the text to measure.
    """
    sentences = [s for s in re.split(r"[.!?]+", text) if s.strip()]
    return {"words": len(text.split()), "characters": len(text), "sentences": len(sentences)}


@tool
def draft_document(topic: str, audience: str = "team", points: int = 3) -> dict[str, Any]:
    """Draft a short document about a topic (deterministic template, no LLM).

    Args:
        topic: what the document is about.
        audience: who it is for.
        points: how many bullet points to write (1-10).
    """
    points = max(1, min(points, 10))
    notes = search_notes(topic, limit=points)
    bullets = [f"{n['title']}: {n['text']}" for n in notes]
    while len(bullets) < points:
        bullets.append(f"Open question {len(bullets) + 1} about {topic}.")
    body = "\n".join(f"- {b}" for b in bullets)
    return {
        "title": f"{topic.strip().capitalize()} — a note for the {audience}",
        "body": body,
        "sources": [n["id"] for n in notes],
    }


@tool
def extract_keywords(text: str, limit: int = 5) -> list[str]:
    """The most frequent meaningful words of a text, most frequent first.

    Args:
        text: the text to analyse.
        limit: at most this many keywords.
    """
    counts: dict[str, int] = {}
    for word in _terms(text):
        if len(word) > 2:
            counts[word] = counts.get(word, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[: max(limit, 0)]]


@tool
def sentiment(text: str) -> dict[str, Any]:
    """Score a text's sentiment from -1 (negative) to 1 (positive) with a word list.

    Args:
        text: the text to score.
    """
    positive = {"good", "great", "excellent", "love", "happy", "fast", "easy", "thanks"}
    negative = {"bad", "slow", "broken", "hate", "angry", "bug", "error", "refund", "fail"}
    words = [w.lower() for w in _WORD.findall(text)]
    pos = sum(w in positive for w in words)
    neg = sum(w in negative for w in words)
    score = 0.0 if pos + neg == 0 else round((pos - neg) / (pos + neg), 3)
    label = "positive" if score > 0.2 else "negative" if score < -0.2 else "neutral"
    return {"score": score, "label": label, "positive": pos, "negative": neg}


@tool
async def read_file(path: str, offset: int = 0) -> dict[str, Any]:
    """Read a file of this run (an upload or an artifact): its text, or for a binary
    file a reference (name, type, size, path, download URL).

    Args:
        path: the file's path in the run's files, as the upload notice names it.
        offset: the byte to start at, for a long text (the previous call's next_offset).
    """
    return await read_run_file(path, offset)


PLAN_MAX_TASKS = 50
"""Tasks one ``update_plan`` call may post (docs/graphs/tools.md#plans)."""


@tool
async def update_plan(
    tasks: list[PlanTask], ctx: ToolContext, explanation: str | None = None
) -> dict[str, Any]:
    """Show the user your plan: post the whole task list, each task with its status
    (pending, in_progress, done). Call it again whenever a task's status changes.

    Args:
        tasks: every task of the plan, in order: {"title": ..., "status": ...}.
        explanation: a sentence on what changed, if anything.
    """
    if not tasks or len(tasks) > PLAN_MAX_TASKS:
        raise ToolError(f"tasks: give 1 to {PLAN_MAX_TASKS} tasks, not {len(tasks)}")
    listed = [task.model_dump() for task in tasks]
    done = sum(1 for task in tasks if task.status == "done")
    if ctx.post_plan is None:
        # A map's agent items post no messages (docs/graphs/items.md).
        return {"posted": False, "tasks": len(tasks), "done": done}
    await ctx.post_plan(listed, explanation)
    return {"posted": True, "tasks": len(tasks), "done": done}
