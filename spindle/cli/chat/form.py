"""Questions for a prompt's ``uiSchema`` in a terminal (``spindle chat``).

A REQUEST_INPUT message carries the JSON Schema of the answer it wants.
``form_fields`` turns an object schema into one field per property, in the
schema's order: an ``enum`` becomes numbered choices, ``boolean`` a yes/no,
``integer``/``number`` a checked number, ``string`` free text, anything else
JSON; required fields must be answered, others may be left empty (or take their
``default``). A schema that is not an object of properties asks for one line of
text, sent as the message. ``ask`` asks each field until its answer parses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

Read = Callable[[str], str]
Write = Callable[[str], None]

MESSAGE_FIELD = ""  # the name of the one field of a free-text prompt
_YES = {"y", "yes", "true", "1"}
_NO = {"n", "no", "false", "0"}


@dataclass(frozen=True)
class FormField:
    """One question.

    Attributes:
        name: the property (``MESSAGE_FIELD`` for a free-text prompt).
        title: what to call it (the schema's ``title``, else the name).
        kind: ``enum``, ``boolean``, ``integer``, ``number``, ``string`` or ``json``.
        required: an empty answer is refused.
        choices: the values of an ``enum``.
        default: used for an empty answer.
        description: the schema's ``description``.
    """

    name: str
    title: str
    kind: str
    required: bool = False
    choices: list[Any] = field(default_factory=list)
    default: Any = None
    description: str | None = None

    def label(self) -> str:
        """The question line, e.g. ``Decision [required] (1 approve, 2 reject): ``."""
        parts = [self.title]
        if self.required:
            parts.append("[required]")
        if self.kind == "enum":
            parts.append("(" + ", ".join(f"{k} {v}" for k, v in enumerate(self.choices, 1)) + ")")
        elif self.kind == "boolean":
            parts.append("(y/n)")
        elif self.kind in ("integer", "number", "json"):
            parts.append(f"({self.kind})")
        if self.default is not None:
            parts.append(f"[default {self.default}]")
        return " ".join(parts) + ": "

    def parse(self, text: str) -> Any:
        """The value of an answer.

        Raises:
            ValueError: the answer does not fit the field (the message says why).
        """
        text = text.strip()
        if self.kind == "enum":
            if text.isdigit() and 1 <= int(text) <= len(self.choices):
                return self.choices[int(text) - 1]
            for choice in self.choices:
                if text == str(choice):
                    return choice
            raise ValueError(f"choose one of: {', '.join(str(c) for c in self.choices)}")
        if self.kind == "boolean":
            if text.lower() in _YES:
                return True
            if text.lower() in _NO:
                return False
            raise ValueError("answer y or n")
        if self.kind == "integer":
            try:
                return int(text)
            except ValueError:
                raise ValueError("a whole number, please") from None
        if self.kind == "number":
            try:
                return float(text)
            except ValueError:
                raise ValueError("a number, please") from None
        if self.kind == "json":
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:
                raise ValueError("valid JSON, please") from None
        return text


def _kind(prop: dict[str, Any]) -> str:
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return "enum"
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    return kind if kind in ("boolean", "integer", "number", "string") else "json"


def form_fields(schema: Any) -> list[FormField]:
    """The questions a prompt's ``uiSchema`` asks, in its order."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return [FormField(MESSAGE_FIELD, "Your answer", "string", required=True)]
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    fields = []
    for name, raw in properties.items():
        prop: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind = _kind(prop)
        fields.append(
            FormField(
                name=name,
                title=str(prop.get("title") or name),
                kind=kind,
                required=name in needed,
                choices=list(prop["enum"]) if kind == "enum" else [],
                default=prop.get("default"),
                description=prop.get("description"),
            )
        )
    return fields


def ask(fields: list[FormField], read: Read, write: Write) -> dict[str, Any]:
    """Ask each field until its answer parses; returns ``{name: value}``.

    Empty answers to optional fields are left out (or take the default). A
    free-text prompt answers ``{MESSAGE_FIELD: text}``.

    Raises:
        EOFError: the input ended before the form was complete.
    """
    answer: dict[str, Any] = {}
    for question in fields:
        if question.description:
            write(f"  {question.description}\n")
        while True:
            text = read(question.label())
            if not text.strip():
                if question.default is not None:
                    answer[question.name] = question.default
                    break
                if not question.required:
                    break
                write("  this field is required\n")
                continue
            try:
                answer[question.name] = question.parse(text)
                break
            except ValueError as exc:
                write(f"  {exc}\n")
    return answer
