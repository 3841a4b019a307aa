"""``router`` node: choose the output port(s) whose condition holds.

The router is transparent for data: its output is the previous node's output,
so nodes after it see ``_previous`` as if the router were not there. Its
decision is the ports it returns (edges with a matching ``from_port`` are taken).
"""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.expressions import ExpressionError, evaluate, is_truthy
from spindle.shared.graphs.node_params import RouterParams
from spindle.shared.graphs.node_types import ROUTER
from spindle.worker.contracts.param_resolution import invalid_params
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, implements


@implements(ROUTER)
async def run_router(ctx: NodeContext) -> NodeResult:
    """Choose the next edges by evaluating route conditions over the run state."""
    params: RouterParams = ctx.params
    chosen: list[str] = []
    for route in params.routes:
        try:
            matched = is_truthy(evaluate(route.when, ctx.state))
        except ExpressionError as exc:
            raise invalid_params(
                f"node '{ctx.node.id}': route '{route.port}': {exc}",
                [{"node": ctx.node.id, "field": "params.routes", "rule": "expression"}],
            ) from exc
        if matched and route.port not in chosen:
            chosen.append(route.port)
            if not params.all_matches:
                break
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
