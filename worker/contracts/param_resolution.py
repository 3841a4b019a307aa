"""Resolving a node's parameters: literal params, templates, then ``inputs``.

Order: string templates (``{{ expr }}``) in the literal ``params`` the node type
names are rendered over the run state; then each ``inputs`` mapping (param name →
JMESPath over the state) overlays its value; then the node type's params model
validates the result. Bad parameters are a non-retryable ``InvalidParams``
failure: retrying cannot fix a graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.errors import InvalidParams, to_application_error
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.expressions import ExpressionError, evaluate, render_template

INVALID_PARAMS = InvalidParams.application_type
M = TypeVar("M", bound=BaseModel)


def invalid_params(message: str, errors: list[dict[str, Any]] | None = None) -> ApplicationError:
    """The non-retryable error for parameters no retry can fix."""
    return to_application_error(InvalidParams(message, errors=errors))


def render_deep(value: Any, state: dict[str, Any]) -> Any:
    """Render templates in every string of a (nested) value."""
    if isinstance(value, str):
        return render_template(value, state)
    if isinstance(value, list):
        return [render_deep(v, state) for v in value]
    if isinstance(value, dict):
        return {k: render_deep(v, state) for k, v in value.items()}
    return value


def resolve_params(
    node: NodeSpec, state: dict[str, Any], *, templates: Iterable[str] = ()
) -> dict[str, Any]:
    """The node's params with templates rendered and ``inputs`` overlaid.

    Raises:
        ApplicationError: ``InvalidParams`` when an expression fails.
    """
    params = dict(node.params)
    for name in templates:
        if name in params and name not in node.inputs:
            try:
                params[name] = render_deep(params[name], state)
            except ExpressionError as exc:
                raise invalid_params(
                    f"node '{node.id}': params.{name}: {exc}",
                    [{"node": node.id, "field": f"params.{name}", "rule": "template"}],
                ) from exc
    for name, expression in node.inputs.items():
        try:
            params[name] = evaluate(expression, state)
        except ExpressionError as exc:
            raise invalid_params(
                f"node '{node.id}': inputs.{name}: {exc}",
                [{"node": node.id, "field": f"inputs.{name}", "rule": "expression"}],
            ) from exc
    return params


def validate_params(node: NodeSpec, params: dict[str, Any], model: type[M]) -> M:
    """Validate resolved params with the node type's model.

    Raises:
        ApplicationError: ``InvalidParams`` naming the node and each field.
    """
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        errors = [
            {
                "node": node.id,
                "field": "params." + ".".join(str(p) for p in e["loc"]),
                "rule": e["type"],
                "message": e["msg"],
            }
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        raise invalid_params(f"node '{node.id}' has invalid params: {detail}", errors) from exc
