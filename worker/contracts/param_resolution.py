"""Resolving a node's parameters: literal params, templates, then ``inputs``.

Order: string templates (``{{ expr }}``) in the literal ``params`` the node type
names are rendered over the run state; then each ``inputs`` mapping (param name →
JMESPath over the state) overlays its value; then the node type's params model
validates the result. Bad parameters are a non-retryable ``InvalidParams``
failure: retrying cannot fix a graph. Every evaluation counts against the
caller's ``EvaluationBudget`` (the node execution's, or the workflow task's);
one that runs out is a non-retryable ``ExpressionBudgetSpent`` naming the node
and the setting (docs/graphs/index.md#expression-limits).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.errors import (
    ExpressionBudgetSpent,
    InvalidParams,
    to_application_error,
)
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs import expressions
from spindle.shared.graphs.expressions import (
    EvaluationBudget,
    ExpressionError,
    evaluate,
    render_template,
)

INVALID_PARAMS = InvalidParams.application_type
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

NODE_STEPS_SETTING = "SPINDLE_EXPRESSION_NODE_STEPS"
"""The setting that sizes a node execution's expression budget (named in its error)."""


YIELD_EVERY_STEPS = 1000
"""How often (in steps, about a millisecond) an evaluation in a worker thread lets
the event loop have the interpreter (``EvaluationBudget.yield_every``)."""


def node_budget(node_id: str, steps: int, *, owner: str | None = None) -> EvaluationBudget:
    """The expression budget of one execution of ``node_id``: ``steps`` over all of
    its evaluations (the ``expression_node_steps`` setting), for ``off_loop``."""
    return EvaluationBudget(
        limit=steps,
        owner=owner or f"node '{node_id}'",
        setting=NODE_STEPS_SETTING,
        yield_every=YIELD_EVERY_STEPS,
    )


async def off_loop(work: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``work(*args)`` (evaluations: pure CPU) in a thread, not on the event loop.

    An evaluation holds the thread for up to its node's whole budget; on the loop
    it would stall every other run's activities on this worker meanwhile. In a
    thread the loop takes the interpreter back at least every switch interval
    (5 ms), so other tenants' runs go on (docs/operations/threat-model.md).
    """
    return await asyncio.to_thread(work, *args, **kwargs)


def is_budget_spent(exc: BaseException) -> bool:
    """Whether ``exc`` is the failure of a node whose expression budget ran out."""
    return isinstance(exc, ApplicationError) and exc.type == ExpressionBudgetSpent.application_type


def has_expressions(node: NodeSpec, templates: Iterable[str]) -> bool:
    """Whether resolving ``node``'s params evaluates anything (``inputs`` or a ``{{``)."""
    return bool(node.inputs) or any(
        _has_field(node.params[name]) for name in templates if name in node.params
    )


def _has_field(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, list):
        return any(_has_field(v) for v in value)
    if isinstance(value, dict):
        return any(_has_field(v) for v in value.values())
    return False


def invalid_params(message: str, errors: list[dict[str, Any]] | None = None) -> ApplicationError:
    """The non-retryable error for parameters no retry can fix."""
    return to_application_error(InvalidParams(message, errors=errors))


def budget_spent(node_id: str, exc: expressions.ExpressionBudgetSpent) -> ApplicationError:
    """The non-retryable failure of a node whose expressions spent ``exc``'s budget."""
    return to_application_error(
        ExpressionBudgetSpent(
            f"node '{node_id}': {exc}",
            context={"node": node_id, "limit": exc.limit, "setting": exc.setting},
        )
    )


def expression_failure(
    node_id: str, field: str, rule: str, exc: ExpressionError
) -> ApplicationError:
    """The failure of ``node_id`` for ``exc`` at ``field``: ``ExpressionBudgetSpent``
    when a shared budget ran out, else ``InvalidParams`` naming field and rule."""
    if isinstance(exc, expressions.ExpressionBudgetSpent):
        return budget_spent(node_id, exc)
    return invalid_params(
        f"node '{node_id}': {field}: {exc}",
        [{"node": node_id, "field": field, "rule": rule}],
    )


def render_deep(value: Any, state: dict[str, Any], budget: EvaluationBudget | None = None) -> Any:
    """Render templates in every string of a (nested) value, all against ``budget``."""
    if isinstance(value, str):
        return render_template(value, state, budget=budget)
    if isinstance(value, list):
        return [render_deep(v, state, budget) for v in value]
    if isinstance(value, dict):
        return {k: render_deep(v, state, budget) for k, v in value.items()}
    return value


def resolve_params(
    node: NodeSpec,
    state: dict[str, Any],
    *,
    templates: Iterable[str] = (),
    budget: EvaluationBudget | None = None,
) -> dict[str, Any]:
    """The node's params with templates rendered and ``inputs`` overlaid.

    Args:
        node: the node.
        state: what its templates and ``inputs`` read.
        templates: the params its type renders as templates.
        budget: shared by all its evaluations (the node execution's or the workflow
            task's); None: each evaluation alone is bounded.

    Raises:
        ApplicationError: ``InvalidParams`` when an expression fails;
            ``ExpressionBudgetSpent`` when ``budget`` runs out.
    """
    params = dict(node.params)
    for name in templates:
        if name in params and name not in node.inputs:
            try:
                params[name] = render_deep(params[name], state, budget)
            except ExpressionError as exc:
                raise expression_failure(node.id, f"params.{name}", "template", exc) from exc
    for name, expression in node.inputs.items():
        try:
            params[name] = evaluate(expression, state, budget=budget)
        except ExpressionError as exc:
            raise expression_failure(node.id, f"inputs.{name}", "expression", exc) from exc
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
