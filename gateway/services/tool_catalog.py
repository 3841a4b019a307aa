"""The tools a graph's nodes can call, for ``GET /tools`` (docs/graphs/tools.md).

Worker tools (built-in and plug-in) come from the catalog the workers publish
(``spindle.shared.graphs.catalog``); the gateway imports no worker code. The tools
of an agent's MCP servers are listed by the worker when the agent runs
(``spindle.worker.tools.mcp_client``), not here.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from spindle.shared.graphs.catalog import Catalog, ToolInfo


class ToolList(BaseModel):
    """Every tool, sorted by source then name."""

    tools: list[ToolInfo]
    tools_known: bool = Field(
        description="false while no worker has published its catalog: worker tools unknown"
    )


_ORDER = {"builtin": 0, "plugin": 1}


def worker_tools(catalog: Catalog) -> list[ToolInfo]:
    """The worker tools of ``catalog``, built-in first."""
    return sorted(catalog.tools.values(), key=lambda t: (_ORDER.get(t.source, 3), t.name))
