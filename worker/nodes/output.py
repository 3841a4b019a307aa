"""``output`` node: select the run's result and, with a ``message``, announce it."""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.expressions import (
    ExpressionBudgetSpent,
    ExpressionError,
    evaluate,
    render_template,
)
from spindle.shared.graphs.node_params import OutputParams
from spindle.shared.graphs.node_types import OUTPUT
from spindle.worker.contracts.param_resolution import budget_spent, invalid_params, off_loop
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, implements


@implements(OUTPUT)
async def run_output(ctx: NodeContext) -> NodeResult:
    """Select (JMESPath) or pass on the previous output; post ``message`` as ANSWER.

    ``message`` is a template rendered over the run state plus ``output`` (the
    selected value). Without one nothing is posted: the output usually is an
    answer an agent already posted, and the run's COMPLETE carries it too.
    """
    params: OutputParams = ctx.params
    if params.select or params.message:
        output, text = await off_loop(_selected, ctx)
    else:
        output, text = ctx.previous, None
    answer = None
    if text is not None:
        answer = ClosingPost(
            type=AgentMessageType.ANSWER, text=text, details={"node_id": ctx.node.id}
        )
    return NodeResult(data=output, closing=answer)


def _selected(ctx: NodeContext) -> tuple[Any, str | None]:
    """(output, message text), against the execution's one expression budget."""
    params: OutputParams = ctx.params
    budget = ctx.expressions
    try:
        output = ctx.previous
        if params.select:
            output = evaluate(params.select, ctx.state, budget=budget)
        text = (
            render_template(params.message, {**ctx.state, "output": output}, budget=budget)
            if params.message
            else None
        )
    except ExpressionBudgetSpent as exc:
        raise budget_spent(ctx.node.id, exc) from exc
    except ExpressionError as exc:
        raise invalid_params(
            f"node '{ctx.node.id}': {exc}",
            [{"node": ctx.node.id, "field": "params", "rule": "expression"}],
        ) from exc
    return output, text
