"""A node's ``input_schema`` / ``output_schema``: data crossing an edge, validated.

Pure (no I/O): the ``execute_node`` activity checks the envelopes that arrive
(``input_schema``) and the output it returns (``output_schema``); a ``map`` checks
each item (``item_problems``). A failure is the node's ``PayloadInvalid`` error,
naming each field (docs/graphs/index.md#payload-schemas).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spindle.shared.contracts.envelope import NodeMessage
from spindle.shared.contracts.errors import PayloadInvalid
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.graph_errors import schema_errors

#: Violations named in one error message; ``errors`` lists them all.
NAMED_IN_MESSAGE = 5


def payload_problems(schema: dict[str, Any], value: Any, where: str) -> list[dict[str, Any]]:
    """Each violation of ``schema`` by ``value``: ``{field, rule, message}``, the field
    prefixed by ``where`` (e.g. ``input from 'fetch'`` → ``payload.text``)."""
    return [
        {
            "field": f"payload.{path}" if path else "payload",
            "rule": rule,
            "message": f"{where}: payload.{path}: {message}" if path else f"{where}: {message}",
        }
        for path, rule, message in schema_errors(schema, value)
    ]


def _refuse(node: NodeSpec, which: str, problems: list[dict[str, Any]]) -> PayloadInvalid:
    shown = "; ".join(p["message"] for p in problems[:NAMED_IN_MESSAGE])
    more = len(problems) - NAMED_IN_MESSAGE
    tail = f" (and {more} more)" if more > 0 else ""
    return PayloadInvalid(
        f"node '{node.id}': {which} does not fit its {which}_schema: {shown}{tail}",
        errors=[{**p, "node": node.id} for p in problems],
        context={"node": node.id},
    )


def check_inputs(node: NodeSpec, inputs: Iterable[NodeMessage]) -> None:
    """Every arriving envelope's payload fits the node's ``input_schema``.

    Raises:
        PayloadInvalid: naming the sending node and each field.
    """
    if node.input_schema is None:
        return
    problems = [
        problem
        for message in inputs
        for problem in payload_problems(
            node.input_schema, message.payload, f"input from '{message.from_}'"
        )
    ]
    if problems:
        raise _refuse(node, "input", problems)


def check_output(node: NodeSpec, output: Any) -> None:
    """The node's output fits its ``output_schema``.

    Raises:
        PayloadInvalid: naming each field.
    """
    if node.output_schema is None:
        return
    problems = payload_problems(node.output_schema, output, "output")
    if problems:
        raise _refuse(node, "output", problems)


def item_problems(schema: dict[str, Any] | None, value: Any, label: str) -> str | None:
    """One item's violations of a map's schema as an item error text, else None."""
    if schema is None:
        return None
    problems = payload_problems(schema, value, label)
    if not problems:
        return None
    return "; ".join(p["message"] for p in problems[:NAMED_IN_MESSAGE])
