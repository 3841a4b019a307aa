"""``tool`` node: call one registered tool with validated arguments."""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.errors import ToolError, to_application_error
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.node_params import ToolParams
from spindle.shared.graphs.node_types import TOOL
from spindle.shared.store.call_records import tool_key
from spindle.worker.activities.call_replay import call_scope, replayed
from spindle.worker.activities.recorder import summarize
from spindle.worker.contracts.param_resolution import invalid_params
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, implements
from spindle.worker.tools.context import tool_context_of
from spindle.worker.tools.plans import plan_poster
from spindle.worker.tools.registry import ToolDef, get_tool


@implements(TOOL)
async def run_tool(ctx: NodeContext) -> NodeResult:
    """Call one registered Python callable with typed arguments."""
    params: ToolParams = ctx.params
    try:
        tool = get_tool(params.tool)
        tool.validate(params.args)
    except ToolError as exc:
        raise invalid_params(
            f"node '{ctx.node.id}': {exc}",
            [{"node": ctx.node.id, "field": "params.args", "rule": "tool_arguments"}],
        ) from exc
    # Recorded (and, in a recorded fork, replayed) when the activity lends a recorder.
    scope = call_scope()
    plan = None
    if scope is not None:
        part = str(ctx.state.get("item_index", ""))  # a map's items: one call each
        key = tool_key(ctx.node.id, tool.name, params.args)
        plan = await scope.recorder.begin(ctx.run, key, part=part)
    recorded = plan.details() if plan is not None else {}
    await ctx.poster.post(
        AgentMessageType.UPDATE,
        f"Calling tool {tool.name}",
        details={"node_id": ctx.node.id, "tool": tool.name, "args": params.args, **recorded},
    )
    if scope is not None and plan is not None and plan.hit:
        scope.hits += 1
        result: Any = replayed(plan)
    else:
        result = await _call(ctx, tool, params)
    if scope is not None and plan is not None:
        scope.add(scope.recorder.record(plan, result))
    returned = ClosingPost(
        type=AgentMessageType.UPDATE,
        text=f"Tool {tool.name} returned {summarize(result, 120)}",
        details={"node_id": ctx.node.id, "tool": tool.name, **recorded},
    )
    return NodeResult(data=result, metadata=tools_used_meta(ctx.meta, tool.name), closing=returned)


async def _call(ctx: NodeContext, tool: ToolDef, params: ToolParams) -> Any:
    """The tool's result, called for real."""
    try:
        # A tool taking a ToolContext gets the run's ids and context (seed 004).
        context = tool_context_of(
            ctx.run,
            ctx.node.id,
            ctx.node.type,
            ctx.state,
            post_plan=plan_poster(ctx.poster, ctx.node.id),
        )
        return await tool.call(params.args, context)
    except ToolError as exc:
        # The tool itself refused: the same arguments would fail again.
        raise to_application_error(ToolError(f"tool {tool.name} failed: {exc.detail}")) from exc


TOOLS_USED_KEPT = 20
"""Names ``meta.tools_used`` keeps: the latest, oldest first (docs/graphs/index.md)."""


def tools_used_meta(meta: dict[str, Any], name: str) -> dict[str, Any]:
    """``meta`` after one more tool call: the last names and a count of all calls.

    Bounded, so a loop of 10,000 tool nodes does not carry 10,000 names from node
    to node (docs/design.md §10).
    """
    used = meta.get("tools_used")
    names = [*(used if isinstance(used, list) else []), name][-TOOLS_USED_KEPT:]
    count = meta.get("tools_used_count")
    before = count if isinstance(count, int) else len(used) if isinstance(used, list) else 0
    return {"tools_used": names, "tools_used_count": before + 1}
