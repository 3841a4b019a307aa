"""FastAPI dependencies: the clients opened by the app's lifespan.

Routes declare what they use with these ``Annotated`` aliases; the objects
themselves live on ``app.state`` (set in ``spindle.gateway.app.lifespan``), one per
process, shared by every request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from temporalio.client import Client

from spindle.gateway.auth.authenticator import Authenticator
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.gateway.runs.access import RunAction, RunOwner, authorize_run
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.identity import Identity
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_temporal(request: Request) -> Client:
    client: Client = request.app.state.temporal
    return client


def get_bus(request: Request) -> MessageBus:
    bus: MessageBus = request.app.state.bus
    return bus


def get_hub(request: Request) -> SubscriptionHub:
    hub: SubscriptionHub = request.app.state.hub
    return hub


def get_archive(request: Request) -> RunArchive:
    archive: RunArchive = request.app.state.archive
    return archive


def get_catalog_cache(request: Request) -> CatalogCache:
    cache: CatalogCache = request.app.state.catalog
    return cache


def get_file_store(request: Request) -> FileStore:
    store: FileStore = request.app.state.files
    return store


def get_limits(request: Request) -> TenantLimits:
    limits: TenantLimits = request.app.state.limits
    return limits


# Declared for the OpenAPI document (securitySchemes, the /docs "Authorize"
# button); the authenticator itself reads the request, including the GET-only
# ``access_token`` query parameter of streams.
_bearer_scheme = HTTPBearer(
    auto_error=False, description="An API key (spk_…), a JWT or a stream token (st1.…)"
)
_api_key_scheme = APIKeyHeader(name="X-API-Key", auto_error=False, description="An API key")


async def get_identity(
    request: Request,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer_scheme)],
    _api_key: Annotated[str | None, Depends(_api_key_scheme)],
) -> Identity:
    """The authenticated caller (401 problem when credentials are missing or bad)."""
    authenticator: Authenticator = request.app.state.authenticator
    return await authenticator.authenticate(request)


def get_tenant(identity: Annotated[Identity, Depends(get_identity)]) -> str:
    return identity.tenant_id


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
    state = request.app.state
    return await authorize_run(
        workflow_id,
        identity,
        action,
        bus=state.bus,
        archive=state.archive,
        temporal=state.temporal,
        settings=state.settings,
    )


def base_url(request: Request) -> str:
    """The address clients should use for links (``public_url`` wins)."""
    settings: Settings = request.app.state.settings
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return str(request.base_url).rstrip("/")


SettingsDep = Annotated[Settings, Depends(get_settings)]
TemporalDep = Annotated[Client, Depends(get_temporal)]
BusDep = Annotated[MessageBus, Depends(get_bus)]
HubDep = Annotated[SubscriptionHub, Depends(get_hub)]
ArchiveDep = Annotated[RunArchive, Depends(get_archive)]
CatalogDep = Annotated[CatalogCache, Depends(get_catalog_cache)]
FileStoreDep = Annotated[FileStore, Depends(get_file_store)]
LimitsDep = Annotated[TenantLimits, Depends(get_limits)]
IdentityDep = Annotated[Identity, Depends(get_identity)]
TenantDep = Annotated[str, Depends(get_tenant)]
ReadableRunDep = Annotated[RunOwner, Depends(readable_run)]
ControllableRunDep = Annotated[RunOwner, Depends(controllable_run)]
BaseUrlDep = Annotated[str, Depends(base_url)]
