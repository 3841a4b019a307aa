"""Checks of a prompt answer against its ``ui_schema`` that JSON Schema leaves out.

Shared by graph registration (an ``on_expiry`` answer is checked when the graph
is registered, docs/graphs/node-types.md) and the worker's check of every answer
a human gives (``spindle.worker.contracts.prompt_answers``).
"""

from __future__ import annotations

from typing import Any


def extra_fields(schema: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Answer fields the prompt's schema does not name, one error each.

    JSON Schema lets unnamed properties through by default, so an answer could
    carry anything (900 KB of it) into the run's history and state. Only a schema
    that says so itself (``additionalProperties`` or ``patternProperties``) or
    names no properties at all takes fields it does not name.
    """
    properties = schema.get("properties")
    if (
        not isinstance(properties, dict)
        or "additionalProperties" in schema
        or "patternProperties" in schema
    ):
        return []
    allowed = ", ".join(sorted(properties)) or "none"
    return [
        {
            "field": name,
            "rule": "additionalProperties",
            "message": f"'{name}' is not a field of this prompt (fields: {allowed})",
        }
        for name in sorted(answer)
        if name not in properties
    ]
