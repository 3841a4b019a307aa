"""FastAPI dependencies: the clients opened by the app's lifespan, and the caller.

Routes declare what they use with these ``Annotated`` aliases; the objects
themselves live in the one ``GatewayState`` (``spindle.gateway.services.state``,
built by ``spindle.gateway.app``'s lifespan), one per process, shared by every request.

Every authenticated route (and the JSON-RPC dispatcher) learns its caller through
``authenticate``, which also enforces ``STREAM_TOKEN_ROUTES``: the only routes a
run-scoped principal (a stream token) may call. A route added later is closed to
stream tokens until it is listed there (docs/operations/threat-model.md).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from temporalio.client import Client

from spindle.gateway.runs.access import RunAction, RunOwner
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.runs.lookup import not_found
from spindle.gateway.services.callers import Caller, caller_for, public_base_url
from spindle.gateway.services.run_views import authorize
from spindle.gateway.services.state import GatewayState, gateway_state
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import Forbidden, RateLimited, Unauthorized
from spindle.shared.contracts.identity import Identity
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore


def get_state(request: Request) -> GatewayState:
    return gateway_state(request)


StateDep = Annotated[GatewayState, Depends(get_state)]


def get_settings(state: StateDep) -> Settings:
    return state.settings


def get_temporal(state: StateDep) -> Client:
    return state.temporal


def get_bus(state: StateDep) -> MessageBus:
    return state.bus


def get_archive(state: StateDep) -> RunArchive:
    return state.archive


def get_catalog_cache(state: StateDep) -> CatalogCache:
    return state.catalog


def get_file_store(state: StateDep) -> FileStore:
    return state.files


# Declared for the OpenAPI document (securitySchemes, the /docs "Authorize"
# button); the authenticator itself reads the request, including the GET-only
# ``access_token`` query parameter of streams.
_bearer_scheme = HTTPBearer(
    auto_error=False, description="An API key (spk_…), a JWT or a stream token (st1.…)"
)
_api_key_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key")


# What a stream token may do: read its own run's messages, nothing else. Route
# templates (without the @vertesia/client prefix) and the methods allowed on them.
STREAM_TOKEN_ROUTES: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/runs/{workflow_id}/{run_id}/stream"),
        ("GET", "/runs/{workflow_id}/{run_id}/updates"),
    }
)
# The same routes are served under @vertesia/client's fixed prefix (gateway.app).
_ROUTE_PREFIXES = ("/api/v1/workflows",)


def stream_scope_allows(request: Request, identity: Identity) -> None:
    """Refuse a run-scoped caller everything but reading its run's messages.

    Raises:
        Forbidden: the route is not in ``STREAM_TOKEN_ROUTES``.
        NotFound: the route is, but for another run (as an unknown run would).
    """
    if identity.run_scope is None:
        return
    route = request.scope.get("route")
    template: str = getattr(route, "path", "") or ""
    for prefix in _ROUTE_PREFIXES:
        if template.startswith(prefix + "/"):
            template = template.removeprefix(prefix)
    method = "GET" if request.method == "HEAD" else request.method
    if (method, template) not in STREAM_TOKEN_ROUTES:
        raise Forbidden(
            "a stream token may only read its own run's stream and history "
            "(GET …/stream, GET …/updates)"
        )
    workflow_id = request.path_params.get("workflow_id")
    if workflow_id != identity.run_scope:
        raise not_found(str(workflow_id))


async def authenticate(request: Request) -> Identity:
    """The caller of ``request``, refused where its credential does not reach.

    Raises:
        Unauthorized: missing or bad credentials (401).
        Forbidden: a stream token outside ``STREAM_TOKEN_ROUTES`` (403).
        RateLimited: the client failed to authenticate too often (429).
    """
    identity = await gateway_state(request).authenticator.authenticate(request)
    stream_scope_allows(request, identity)
    return identity


async def get_identity(
    request: Request,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer_scheme)],
    _api_key: Annotated[str | None, Depends(_api_key_scheme)],
) -> Identity:
    """The authenticated caller (401 problem when credentials are missing or bad)."""
    return await authenticate(request)


async def optional_identity(request: Request) -> Identity | None:
    """The caller if it sent valid credentials; None otherwise (public routes)."""
    sent = (
        request.headers.get("authorization")
        or request.headers.get("x-api-key")
        or request.query_params.get("access_token")
    )
    if not sent and not gateway_state(request).authenticator.disabled:
        return None
    try:
        return await authenticate(request)
    except (Unauthorized, RateLimited):
        return None


def get_tenant(identity: Annotated[Identity, Depends(get_identity)]) -> str:
    return identity.tenant_id


def get_graph_writer(
    identity: Annotated[Identity, Depends(get_identity)],
    settings: Annotated[Settings, Depends(get_settings)],
) -> str:
    """The caller's tenant, if the caller may register or replace its graphs (else 403).

    A graph decides what every later run of it does (e.g. whether a human
    approves a step), so changing one needs a role in ``graph_write_roles``.
    """
    if identity.method == "disabled" or identity.has_any_role(settings.graph_write_roles):
        return identity.tenant_id
    raise Forbidden(
        f"registering or replacing graphs needs role "
        f"{' or '.join(settings.graph_write_roles) or '(none configured)'} (graph_write_roles)"
    )


async def readable_run(
    workflow_id: str,
    request: Request,
    identity: Annotated[Identity, Depends(get_identity)],
) -> RunOwner:
    """The run in the path, if the caller's tenant owns it (else 404)."""
    return await _authorize(request, workflow_id, identity, RunAction.READ)


async def controllable_run(
    workflow_id: str,
    request: Request,
    identity: Annotated[Identity, Depends(get_identity)],
) -> RunOwner:
    """The run in the path, if the caller may control it (404 / 403)."""
    return await _authorize(request, workflow_id, identity, RunAction.CONTROL)


async def _authorize(
    request: Request, workflow_id: str, identity: Identity, action: RunAction
) -> RunOwner:
    return await authorize(caller_for(request, identity), workflow_id, action)


def base_url(request: Request) -> str:
    """The address clients should use for links (``public_url`` wins)."""
    return public_base_url(request)


def get_caller(request: Request, identity: Annotated[Identity, Depends(get_identity)]) -> Caller:
    """The authenticated caller, with the gateway's state (for the service layer)."""
    return caller_for(request, identity)


SettingsDep = Annotated[Settings, Depends(get_settings)]
TemporalDep = Annotated[Client, Depends(get_temporal)]
BusDep = Annotated[MessageBus, Depends(get_bus)]
ArchiveDep = Annotated[RunArchive, Depends(get_archive)]
CatalogDep = Annotated[CatalogCache, Depends(get_catalog_cache)]
FileStoreDep = Annotated[FileStore, Depends(get_file_store)]
IdentityDep = Annotated[Identity, Depends(get_identity)]
OptionalIdentityDep = Annotated[Identity | None, Depends(optional_identity)]
TenantDep = Annotated[str, Depends(get_tenant)]
GraphWriterDep = Annotated[str, Depends(get_graph_writer)]
ReadableRunDep = Annotated[RunOwner, Depends(readable_run)]
ControllableRunDep = Annotated[RunOwner, Depends(controllable_run)]
BaseUrlDep = Annotated[str, Depends(base_url)]
CallerDep = Annotated[Caller, Depends(get_caller)]
