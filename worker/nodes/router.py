"""``router`` node: choose the output port(s) whose condition holds.

The router is transparent for data: its output is the previous node's output,
so nodes after it see ``_previous`` as if the router were not there. Its
decision is the ports it returns (edges with a matching ``from_port`` are taken).
"""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.expressions import (
    ExpressionBudgetSpent,
    ExpressionError,
    evaluate,
    is_truthy,
)
from spindle.shared.graphs.node_params import RouterParams
from spindle.shared.graphs.node_types import ROUTER
from spindle.worker.contracts.param_resolution import budget_spent, invalid_params, off_loop
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, implements


@implements(ROUTER)
async def run_router(ctx: NodeContext) -> NodeResult:
    """Choose the next edges by evaluating route conditions over the run state."""
    params: RouterParams = ctx.params
    chosen = await off_loop(_matching, ctx)
    details: dict[str, Any] = {"node_id": ctx.node.id, "ports": chosen}
    if chosen:
        decision = ClosingPost(
            type=AgentMessageType.UPDATE, text=f"Route: {', '.join(chosen)}", details=details
        )
    elif params.default is not None:
        chosen = [params.default]
        details = {"node_id": ctx.node.id, "ports": chosen, "default": True}
        decision = ClosingPost(
            type=AgentMessageType.UPDATE, text=f"Route: {params.default} (default)", details=details
        )
    else:
        decision = ClosingPost(
            type=AgentMessageType.WARNING,
            text=f"Router {ctx.node.id}: no route matched and there is no default",
            details=details,
        )
    return NodeResult(data=ctx.previous, ports=chosen, closing=decision)


def _matching(ctx: NodeContext) -> list[str]:
    """The ports whose route holds, all against the execution's one expression budget."""
    params: RouterParams = ctx.params
    chosen: list[str] = []
    for route in params.routes:
        try:
            matched = is_truthy(evaluate(route.when, ctx.state, budget=ctx.expressions))
        except ExpressionBudgetSpent as exc:
            raise budget_spent(ctx.node.id, exc) from exc
        except ExpressionError as exc:
            raise invalid_params(
                f"node '{ctx.node.id}': route '{route.port}': {exc}",
                [{"node": ctx.node.id, "field": "params.routes", "rule": "expression"}],
            ) from exc
        if matched and route.port not in chosen:
            chosen.append(route.port)
            if not params.all_matches:
                break
    return chosen
