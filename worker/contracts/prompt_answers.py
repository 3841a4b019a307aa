"""Human-in-the-loop answers: turn a ``UserInput`` into a valid prompt answer.

Pure and deterministic (JSON Schema validation only), so the ``GraphRun``
workflow runs it inside its ``UserInput`` update validator: an invalid answer is
rejected before it enters the run's history and the run keeps waiting. The
gateway may run the same check to answer early with a 422.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

from spindle.shared.contracts.errors import InputInvalid
from spindle.shared.contracts.runs import PendingInput, UserInput
from spindle.shared.graphs.answers import extra_fields

ROOT_FIELD = "$"


def single_required_string(schema: dict[str, Any]) -> str | None:
    """The property a plain text message fills, if the schema asks for exactly one
    required string (seed 000's ``<node>_response``); else None."""
    required = schema.get("required")
    properties = schema.get("properties")
    if not isinstance(required, list) or len(required) != 1 or not isinstance(properties, dict):
        return None
    name = required[0]
    prop = properties.get(name)
    if not isinstance(prop, dict):
        return None
    kind = prop.get("type")
    is_string = kind == "string" or (isinstance(kind, list) and "string" in kind)
    # An enum of strings is still a string answer ("approve" / "reject").
    if not is_string and kind is None and isinstance(prop.get("enum"), list):
        is_string = all(isinstance(v, str) for v in prop["enum"])
    return name if is_string else None


def message_form(schema: dict[str, Any], message: str) -> dict[str, Any] | None:
    """The message as a form answer when it is a JSON object whose keys are all
    fields of the prompt (``'{"decision": "approve", "note": "ok"}'``), else None.

    Clients that only send text (A2A, chat boxes) answer a multi-field form this
    way. Requiring every key to name a field keeps a one-string prompt's answer
    that merely looks like JSON as text.
    """
    text = message.strip()
    properties = schema.get("properties")
    if not text.startswith("{") or not isinstance(properties, dict):
        return None
    try:
        parsed = json.loads(text)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or not parsed or not set(parsed) <= set(properties):
        return None
    return parsed


def resolve_answer(
    pending: PendingInput, user_input: UserInput, *, blank_required: bool = False
) -> dict[str, Any]:
    """The answer object for ``pending`` from ``user_input``, validated.

    ``user_input.data`` is the structured answer. When only ``message`` is sent
    and it is a JSON object of the prompt's fields, it is the answer
    (:func:`message_form`); else when the prompt's schema has exactly one required
    string property, the message fills it; a message with no data for any other
    schema is validated as an empty object, so the error names the required fields.

    A required text field is an answer only when it holds some text: ``""`` (or
    only whitespace) is refused naming the field, unless the schema lists ``""``
    itself (``enum`` / ``const``).

    Args:
        blank_required: take a blank required text field (only for runs that
            accepted one before the rule existed, so their histories replay).

    Returns:
        The answer object, valid against ``pending.ui_schema``.

    Raises:
        InputInvalid: the answer is empty or breaks the schema; ``errors`` holds one
            ``{"field", "rule", "message"}`` per problem (field is a JSON path like
            ``decision`` or ``items[0].name``; rule the JSON Schema keyword).
    """
    schema = pending.ui_schema
    if user_input.data is not None:
        answer = dict(user_input.data)
        key = single_required_string(schema)
        if key is not None and key not in answer and user_input.message:
            answer[key] = user_input.message
    elif user_input.message is not None:
        key = single_required_string(schema)
        answer = message_form(schema, user_input.message) or (
            {key: user_input.message} if key is not None else {}
        )
    else:
        raise InputInvalid(
            f"prompt '{pending.node_id}': empty answer: send a message or data",
            errors=[
                {
                    "field": ROOT_FIELD,
                    "rule": "required",
                    "message": "send a message or data",
                }
            ],
        )

    errors = extra_fields(schema, answer) + answer_errors(schema, answer)
    if not blank_required:
        errors += blank_required_text(schema, answer)
    if errors:
        summary = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise InputInvalid(
            f"invalid answer for prompt '{pending.node_id}': {summary}", errors=errors
        )
    return answer


def blank_required_text(schema: dict[str, Any], answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``required`` rule error for each required text field left blank.

    JSON Schema takes ``""`` for a required string; a person asked for text who
    sends none has not answered (docs/graphs/node-types.md, prompt).
    """
    required = schema.get("required")
    properties = schema.get("properties")
    if not isinstance(required, list) or not isinstance(properties, dict):
        return []
    out = []
    for name in required:
        value = answer.get(name) if isinstance(name, str) else None
        prop = properties.get(name)
        if not isinstance(value, str) or value.strip() or not isinstance(prop, dict):
            continue
        if "" in (prop.get("enum") or []) or prop.get("const") == "":
            continue  # the schema itself offers the empty text as a choice
        out.append(
            {
                "field": json_path([name]),
                "rule": "required",
                "message": f"'{name}' is required and may not be blank",
            }
        )
    return out


def answer_errors(schema: dict[str, Any], answer: Any) -> list[dict[str, Any]]:
    """Every JSON Schema violation of ``answer``, as ``{"field", "rule", "message"}``."""
    cls = validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return [{"field": ROOT_FIELD, "rule": "schema", "message": f"bad uiSchema: {exc.message}"}]
    validator = cls(schema)
    found = sorted(validator.iter_errors(answer), key=lambda e: (list(e.absolute_path), e.message))
    return [item for error in found for item in _describe(error)]


def _describe(error: ValidationError) -> Iterable[dict[str, Any]]:
    path = list(error.absolute_path)
    rule = str(error.validator)
    if rule == "required" and isinstance(error.instance, dict):
        # Name the missing property itself, not the object that lacks it.
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [
            name
            for name in required
            if name not in error.instance and error.message.startswith(repr(name))
        ]
        for name in missing or [None]:
            field = json_path([*path, name] if name is not None else path)
            yield {"field": field, "rule": rule, "message": error.message}
        return
    yield {"field": json_path(path), "rule": rule, "message": error.message}


def json_path(parts: list[Any]) -> str:
    """``["items", 0, "name"]`` → ``items[0].name``; ``[]`` → ``$``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or ROOT_FIELD
