"""``tool`` node: call one registered tool with validated arguments."""

from __future__ import annotations

from typing import Any

from spindle.shared.contracts.errors import ToolError, to_application_error
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.node_params import ToolParams
from spindle.shared.graphs.node_types import TOOL
from spindle.worker.activities.recorder import summarize
from spindle.worker.contracts.param_resolution import invalid_params
from spindle.worker.registry import ClosingPost, NodeContext, NodeResult, implements
from spindle.worker.tools.registry import get_tool


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
    await ctx.poster.post(
        AgentMessageType.UPDATE,
        f"Calling tool {tool.name}",
        details={"node_id": ctx.node.id, "tool": tool.name, "args": params.args},
    )
    try:
        result: Any = await tool.call(params.args)
    except ToolError as exc:
        # The tool itself refused: the same arguments would fail again.
        raise to_application_error(ToolError(f"tool {tool.name} failed: {exc.detail}")) from exc
    returned = ClosingPost(
        type=AgentMessageType.UPDATE,
        text=f"Tool {tool.name} returned {summarize(result, 120)}",
        details={"node_id": ctx.node.id, "tool": tool.name},
    )
    return NodeResult(data=result, metadata=tools_used_meta(ctx.meta, tool.name), closing=returned)


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
