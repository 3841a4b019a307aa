"""The tools a graph's nodes can call, for ``GET /tools`` (docs/graphs/tools.md).

Worker tools (built-in and plug-in) come from the catalog the workers publish
(``spindle.shared.graphs.catalog``); the gateway imports no worker code. With
``?graph=``, the tools of that graph's agents' MCP servers are added, each with
its server and nodes, listed by the gateway under the worker's rules
(``spindle.gateway.services.mcp_tools``); a server that cannot be used or
reached is reported beside them.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from spindle.gateway.services.mcp_tools import ListedTool, McpServerStatus, McpToolListing
from spindle.shared.graphs.catalog import Catalog, ToolInfo


class ToolList(BaseModel):
    """Every tool, sorted by source then name; with ``graph``, its MCP servers' too."""

    tools: list[ListedTool]
    tools_known: bool = Field(
        description="false while no worker has published its catalog: worker tools unknown"
    )
    graph: str | None = Field(None, description="the graph whose MCP tools are included")
    mcp_servers: list[McpServerStatus] = Field(
        default_factory=list,
        description="the graph's MCP servers: reachable, or why not (their tools are missing)",
    )
    dynamic_mcp_nodes: list[str] = Field(
        default_factory=list,
        description="agent nodes whose MCP servers come from inputs: listed only when run",
    )


_ORDER = {"builtin": 0, "plugin": 1, "mcp": 2}


def worker_tools(catalog: Catalog) -> list[ToolInfo]:
    """The worker tools of ``catalog``, built-in first."""
    return sorted(catalog.tools.values(), key=lambda t: (_ORDER.get(t.source, 3), t.name))


def tool_list(catalog: Catalog, graph: str | None, mcp: McpToolListing | None) -> ToolList:
    """``GET /tools``'s answer: the worker tools, then the graph's MCP tools."""
    tools = [ListedTool.model_validate(t.model_dump()) for t in worker_tools(catalog)]
    if mcp is None:
        return ToolList(tools=tools, tools_known=catalog.tools_known)
    return ToolList(
        tools=tools + mcp.tools,
        tools_known=catalog.tools_known,
        graph=graph,
        mcp_servers=mcp.servers,
        dynamic_mcp_nodes=mcp.dynamic_nodes,
    )
