"""The expression language of graphs: JMESPath, pure and deterministic.

Used for edge conditions (``when``) and node input mappings (``inputs``). It has
no I/O, clock or randomness, so it is safe inside the workflow sandbox; it never
falls back to ``eval``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError
from jmespath.parser import ParsedResult


class ExpressionError(ValueError):
    """An expression does not parse or cannot be evaluated."""


@lru_cache(maxsize=2048)
def compile_expression(expression: str) -> ParsedResult:
    """Parse once; raise ``ExpressionError`` naming the problem."""
    if not expression.strip():
        raise ExpressionError("empty expression")
    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        raise ExpressionError(f"invalid JMESPath expression {expression!r}: {exc}") from exc


def evaluate(expression: str, data: Any) -> Any:
    """Evaluate an expression over ``data`` (the run state)."""
    try:
        return compile_expression(expression).search(data)
    except JMESPathError as exc:
        raise ExpressionError(f"cannot evaluate {expression!r}: {exc}") from exc


def is_truthy(value: Any) -> bool:
    """JMESPath truthiness: false, null, empty string/list/object are false."""
    if value is None or value is False:
        return False
    if isinstance(value, str | list | dict):
        return len(value) > 0
    return True


_TEMPLATE_FIELD = "{{"


def render_template(text: str, data: Any) -> str:
    """Replace each ``{{ expression }}`` in ``text`` with its value over ``data``.

    Strings are inserted as they are; other values as compact JSON.
    """
    if _TEMPLATE_FIELD not in text:
        return text
    import orjson

    out: list[str] = []
    pos = 0
    while True:
        start = text.find(_TEMPLATE_FIELD, pos)
        if start < 0:
            out.append(text[pos:])
            break
        end = text.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(f"unclosed '{{{{' in template at position {start}")
        out.append(text[pos:start])
        value = evaluate(text[start + 2 : end].strip(), data)
        if isinstance(value, str):
            out.append(value)
        elif value is not None:
            out.append(orjson.dumps(value).decode())
        pos = end + 2
    return "".join(out)


def template_expressions(text: str) -> list[str]:
    """The expressions inside ``{{ }}`` of a template, for validation."""
    found: list[str] = []
    pos = 0
    while (start := text.find(_TEMPLATE_FIELD, pos)) >= 0:
        end = text.find("}}", start + 2)
        if end < 0:
            raise ExpressionError(f"unclosed '{{{{' in template at position {start}")
        found.append(text[start + 2 : end].strip())
        pos = end + 2
    return found
