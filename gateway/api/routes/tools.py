"""``GET /tools``: every tool a graph can call, with its description and JSON Schema.

Worker tools (built-in and plug-in) come from the catalog the workers publish
(docs/graphs/tools.md).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends

from spindle.gateway.api.deps import CatalogDep, get_identity
from spindle.gateway.services.tool_catalog import ToolList, worker_tools

router = APIRouter(tags=["graphs"])


@router.get(
    "/tools",
    response_model=ToolList,
    summary="Every tool: description and JSON Schema of its arguments",
    # Credentials like every other read (docs/operations/threat-model.md): plug-in tool
    # names and schemas are the deployment's, not the public's.
    dependencies=[Depends(get_identity)],
)
async def list_tools(catalog: CatalogDep) -> ToolList:
    known = await catalog.get()
    return ToolList(tools=worker_tools(known), tools_known=known.tools_known)
