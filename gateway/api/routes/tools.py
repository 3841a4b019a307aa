"""``GET /tools``: every tool a graph can call, with its description and JSON Schema.

Worker tools (built-in and plug-in) come from the catalog the workers publish;
``?graph=<name>`` adds that graph's MCP-provided tools, each with its server,
and reports each of its MCP servers, reachable or not (docs/graphs/tools.md).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from spindle.gateway.api.deps import ArchiveDep, CatalogDep, StateDep, TenantDep
from spindle.gateway.services.tool_catalog import ToolList, tool_list
from spindle.shared.contracts.errors import NotFound

router = APIRouter(tags=["graphs"])


@router.get(
    "/tools",
    response_model=ToolList,
    summary="Every tool: description and JSON Schema of its arguments (and a graph's MCP tools)",
    responses={
        401: {"description": "missing or invalid credentials (problem+json)"},
        404: {"description": "unknown graph (problem+json)"},
    },
)
async def list_tools(
    catalog: CatalogDep,
    # Credentials like every other read (docs/operations/threat-model.md): plug-in tool
    # names and schemas are the deployment's, not the public's.
    tenant: TenantDep,
    archive: ArchiveDep,
    state: StateDep,
    graph: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            description="a registered graph: add the tools of its agents' MCP servers",
        ),
    ] = None,
) -> ToolList:
    known = await catalog.get()
    if graph is None:
        return tool_list(known, None, None)
    spec = await archive.get_graph(graph, tenant_id=tenant)
    if spec is None:
        raise NotFound(f"graph '{graph}' is not registered")
    listing = await state.mcp_tool_lister().listing(spec)
    return tool_list(known, graph, listing)
