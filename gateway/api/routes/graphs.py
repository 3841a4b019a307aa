"""The graph registry: list, read, register/replace (validated), JSON Schema."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response, status

from spindle.gateway.api.deps import (
    ArchiveDep,
    CatalogDep,
    GraphWriterDep,
    SettingsDep,
    TenantDep,
)
from spindle.gateway.http.documents import read_document
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


# The body is read by ``read_document`` (JSON or YAML), so OpenAPI is told here.
_GRAPH_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "a graph spec (JSON Schema at GET /graphs/schema), as JSON or "
        "YAML; name optional",
        "content": {
            media: {"schema": {"type": "object", "additionalProperties": True}}
            for media in ("application/json", "application/yaml", "text/yaml")
        },
    }
}


@router.put(
    "/graphs/{name}",
    response_model=GraphSpec,
    response_model_by_alias=True,
    response_model_exclude_none=True,
    summary="Register or replace a graph (validated first; 201 when new)",
    description="The body is JSON or YAML (Content-Type application/json, "
    "application/yaml or text/yaml). Every fault of the graph is answered in one 422, "
    "each with node, field and rule.",
    openapi_extra=_GRAPH_BODY,
    responses={
        201: {"description": "registered", "model": GraphSpec},
        400: {"description": "the body is not valid JSON/YAML (line, column) (problem+json)"},
        403: {"description": "the caller has no role in graph_write_roles (problem+json)"},
        415: {"description": "the body is neither JSON nor YAML (problem+json)"},
        422: {"description": "invalid graph, naming each node, field and rule (problem+json)"},
    },
)
async def put_graph(
    name: str,
    *,
    request: Request,
    response: Response,
    archive: ArchiveDep,
    catalog: CatalogDep,
    tenant: GraphWriterDep,
    settings: SettingsDep,
) -> GraphSpec:
    body = await read_document(request)
    if not isinstance(body, dict):
        raise GraphInvalid(
            f"a graph is an object, not {type(body).__name__}",
            errors=[{"node": None, "field": "body", "rule": "type", "message": "not an object"}],
        )
    document = dict(body)
    document.setdefault("name", name)
    if document["name"] != name:
        raise GraphInvalid(
            f"the body names graph '{document['name']}' but the path names '{name}'",
            errors=[{"field": "name", "rule": "path_mismatch", "message": "names differ"}],
        )
    spec = parse_graph(document)
    validate_graph(spec, await catalog.get(), max_node_visits=settings.max_node_visits)
    check_graph_mcp_servers(
        spec, stdio_commands=settings.mcp_stdio_commands, policy=outbound_policy(settings)
    )
    existed = await archive.get_graph(name, tenant_id=tenant) is not None
    await archive.save_graph(spec, tenant_id=tenant)
    response.status_code = status.HTTP_200_OK if existed else status.HTTP_201_CREATED
    return spec
