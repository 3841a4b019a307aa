"""The gateway app's state: one typed object, built by the lifespan, read everywhere.

``spindle.gateway.app`` builds one ``GatewayState`` per process and stores it once
on ``app.state``; routes (``spindle.gateway.api.deps``), protocols and services
read it through ``gateway_state`` instead of loose ``app.state`` attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp
from temporalio.client import Client

from spindle.gateway.auth.authenticator import Authenticator
from spindle.gateway.http.stream_drain import StreamDrain
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.services.mcp_tools import McpToolLister
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.shared.tasks.store import TaskStore
from spindle.shared.temporal.closed_runs import OnClosed

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from opentelemetry.sdk.trace import TracerProvider

STATE_KEY = "gateway"


@dataclass
class GatewayState:
    """Every client and process-wide object the gateway's requests share.

    Attributes:
        settings: the process settings.
        stream_drain: set off on shutdown; open SSE streams end with a retry hint.
        tracer_provider: the OTLP tracer provider, None when tracing is off.
        temporal: the (lazy) Temporal client.
        bus: the Redis message bus.
        hub: the per-process pub/sub subscription hub.
        archive: the MongoDB run archive.
        catalog: the worker's published node-type catalog, cached.
        files: the file store (GridFS).
        limits: the per-tenant rate limits and stream slots.
        authenticator: API keys, JWTs and stream tokens → ``Identity``.
        tasks: the seed 003 task store (over the archive's database).
        keys: the API key store (``/keys``; the authenticator reads it too).
        on_run_closed: settles a run Temporal closed without Spindle.
        mcp_sessions: the MCP session manager, while the lifespan runs it.
        mcp_tools: lists graphs' MCP tools for ``GET /tools`` (``mcp_tool_lister``).
    """

    settings: Settings
    stream_drain: StreamDrain
    tracer_provider: TracerProvider | None
    temporal: Client
    bus: MessageBus
    hub: SubscriptionHub
    archive: RunArchive
    catalog: CatalogCache
    files: FileStore
    limits: TenantLimits
    authenticator: Authenticator
    tasks: TaskStore
    keys: ApiKeyStore | None = None
    on_run_closed: OnClosed | None = None
    mcp_sessions: StreamableHTTPSessionManager | None = None
    mcp_tools: McpToolLister | None = None

    def mcp_tool_lister(self) -> McpToolLister:
        """The process's lister of graphs' MCP tools (``GET /tools?graph=``), made once."""
        if self.mcp_tools is None:
            self.mcp_tools = McpToolLister(self.settings)
        return self.mcp_tools

    def archive_if_enabled(self) -> RunArchive | None:
        """The archive, or None when this gateway keeps no archive."""
        return self.archive if self.settings.archive_enabled else None


def gateway_state(connection: HTTPConnection) -> GatewayState:
    """The state of the app serving ``connection`` (a request or websocket)."""
    return app_state(connection.app)


def app_state(app: ASGIApp) -> GatewayState:
    """The state the lifespan of ``app`` stored.

    Raises:
        RuntimeError: the app's lifespan has not run (no state yet).
    """
    state = getattr(getattr(app, "state", None), STATE_KEY, None)
    if not isinstance(state, GatewayState):
        raise RuntimeError("the gateway's lifespan has not run: no GatewayState on app.state")
    return state
