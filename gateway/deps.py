"""FastAPI dependencies: the clients opened by the app's lifespan.

Routes declare what they use with these ``Annotated`` aliases; the objects
themselves live on ``app.state`` (set in ``gateway.app.lifespan``), one per
process, shared by every request.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from temporalio.client import Client

from gateway.catalog_cache import CatalogCache
from shared.archive import RunArchive
from shared.bus import MessageBus
from shared.bus_hub import SubscriptionHub
from shared.settings import Settings

# Until authentication lands every request acts for this tenant; routes take
# the tenant from ``TenantDep`` so auth can replace it in one place.
DEFAULT_TENANT = "default"


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


def get_tenant() -> str:
    return DEFAULT_TENANT


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
TenantDep = Annotated[str, Depends(get_tenant)]
BaseUrlDep = Annotated[str, Depends(base_url)]
