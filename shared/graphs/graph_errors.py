"""Graph problems as the entries of a 4xx ``errors`` list: node, field, rule, message.

Shared by graph validation and the per-type rules of ``spindle.shared.graphs.node_rules``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema import ValidationError as SchemaError

GraphError = dict[str, Any]


def graph_error(node: str | None, field: str | None, rule: str, message: str) -> GraphError:
    """One problem; ``message`` is prefixed with the node and field it is about."""
    where = f"node '{node}': " if node else ""
    at = f"{field}: " if field else ""
    return {"node": node, "field": field, "rule": rule, "message": f"{where}{at}{message}"}


def _json_path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out.lstrip(".")


def schema_errors(
    schema: dict[str, Any], value: Any, *, skip: Collection[str] = ()
) -> list[tuple[str, str, str]]:
    """(field path, rule, message) of each violation, except under ``skip`` fields.

    A ``required`` violation is reported at the missing property's own path.
    """
    out = []
    validator = Draft202012Validator(schema)
    for err in sorted(
        validator.iter_errors(value), key=lambda e: [str(p) for p in e.absolute_path]
    ):
        path = list(err.absolute_path)
        if err.validator == "required":
            missing = _missing_property(err)
            if missing is not None:
                path.append(missing)
        if path and str(path[0]) in skip:
            continue
        out.append((_json_path(path), str(err.validator), err.message))
    return out


def _missing_property(err: SchemaError) -> str | None:
    # jsonschema's message is "'name' is a required property".
    message = err.message
    if message.startswith("'") and "' is a required property" in message:
        return message[1 : message.index("' is a required property")]
    return None
