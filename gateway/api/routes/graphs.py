"""The graph registry: list, read, register/replace (validated), JSON Schema."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response, status

from spindle.gateway.api.deps import (
    ArchiveDep,
    CatalogDep,
    GraphWriterDep,
    SettingsDep,
    TenantDep,
)
from spindle.gateway.models import GraphList, GraphSummary
from spindle.shared.contracts.errors import GraphInvalid, NotFound
from spindle.shared.contracts.graph_spec import GraphSpec, graph_json_schema
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.mcp_servers import check_graph_mcp_servers
from spindle.shared.platform.outbound import outbound_policy

router = APIRouter(tags=["graphs"])


def summary(spec: GraphSpec) -> GraphSummary:
    return GraphSummary(
        name=spec.name,
        version=spec.version,
        description=spec.description,
        entry=spec.entry,
        node_count=len(spec.nodes),
        node_types=sorted({node.type for node in spec.nodes}),
    )


@router.get("/graphs", response_model=GraphList, summary="Registered graphs")
async def list_graphs(archive: ArchiveDep, tenant: TenantDep) -> GraphList:
    specs = await archive.list_graphs(tenant_id=tenant)
    return GraphList(graphs=[summary(spec) for spec in specs])


@router.get("/graphs/schema", summary="The JSON Schema of a graph spec")
async def get_graph_schema() -> dict[str, Any]:
    return graph_json_schema()


@router.get(
    "/graphs/{name}",
    response_model=GraphSpec,
    response_model_by_alias=True,
    response_model_exclude_none=True,
    summary="One registered graph",
    responses={404: {"description": "unknown graph (problem+json)"}},
)
async def get_graph(name: str, archive: ArchiveDep, tenant: TenantDep) -> GraphSpec:
    spec = await archive.get_graph(name, tenant_id=tenant)
    if spec is None:
        raise NotFound(f"graph '{name}' is not registered")
    return spec


@router.put(
    "/graphs/{name}",
    response_model=GraphSpec,
    response_model_by_alias=True,
    response_model_exclude_none=True,
    summary="Register or replace a graph (validated first; 201 when new)",
    responses={
        201: {"description": "registered", "model": GraphSpec},
        403: {"description": "the caller has no role in graph_write_roles (problem+json)"},
        422: {"description": "invalid graph, naming the node and the rule (problem+json)"},
    },
)
async def put_graph(
    name: str,
    *,
    spec_body: Annotated[
        dict[str, Any],
        Body(description="a graph spec (JSON Schema at GET /graphs/schema); name optional"),
    ],
    response: Response,
    archive: ArchiveDep,
    catalog: CatalogDep,
    tenant: GraphWriterDep,
    settings: SettingsDep,
) -> GraphSpec:
    document = dict(spec_body)
    document.setdefault("name", name)
    if document["name"] != name:
        raise GraphInvalid(
            f"the body names graph '{document['name']}' but the path names '{name}'",
            errors=[{"field": "name", "rule": "path_mismatch", "message": "names differ"}],
        )
    spec = parse_graph(document)
    validate_graph(spec, await catalog.get())
    check_graph_mcp_servers(
        spec, stdio_commands=settings.mcp_stdio_commands, policy=outbound_policy(settings)
    )
    existed = await archive.get_graph(name, tenant_id=tenant) is not None
    await archive.save_graph(spec, tenant_id=tenant)
    response.status_code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
    return spec
