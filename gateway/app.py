"""The FastAPI application: ``create_app()`` wires settings, clients and routes.

The lifespan opens one of each client per process and closes them on the way
out: the Temporal client (pydantic data converter; lazy, so the gateway starts
and answers 503 while Temporal is down), the Redis message bus, the shared
pub/sub ``SubscriptionHub`` and the Mongo ``RunArchive``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from temporalio.client import Client

from spindle.gateway.api.deps import get_identity
from spindle.gateway.api.routes import agui as agui_routes
from spindle.gateway.api.routes import (
    bundle,
    conversations,
    files,
    fork,
    graphs,
    health,
    history,
    inbox,
    run_view,
    runs,
    signals,
    stream,
    ui,
    workstreams,
)
from spindle.gateway.api.routes import jsonrpc as jsonrpc_routes
from spindle.gateway.api.routes import metrics as metrics_routes
from spindle.gateway.api.routes import schedules as schedule_routes
from spindle.gateway.auth.authenticator import Authenticator
from spindle.gateway.auth.throttle import AuthFailureThrottle
from spindle.gateway.http.access_log import install_access_log_redaction
from spindle.gateway.http.body_limit import ContentLengthLimit
from spindle.gateway.http.problems import install_problem_handlers
from spindle.gateway.http.server_send import SpindleApp
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.gateway.protocols.a2a import install_a2a
from spindle.gateway.protocols.a2a.push_watch import PushWatcher
from spindle.gateway.protocols.mcp import install_mcp, mcp_sessions
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.runs.closed import closed_run_sweep, settle_tasks_hook
from spindle.gateway.streams.drain import StreamDrain
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.logging_setup import redact_url
from spindle.shared.platform.settings import Settings, get_settings
from spindle.shared.platform.telemetry import setup_tracing, temporal_interceptors
from spindle.shared.store.api_keys import ApiKeyStore
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.shared.temporal.converter import data_converter

log = logging.getLogger(__name__)

# @vertesia/client's WorkflowsApi addresses runs under this fixed prefix.
VERTESIA_PREFIX = "/api/v1/workflows"
STARTUP_TIMEOUT = 10.0
SHUTDOWN_STEP_TIMEOUT = 5.0
AUTH_DISABLED_BANNER = (
    "AUTHENTICATION IS OFF (SPINDLE_AUTH_DISABLED=true): every request acts as user "
    "'dev' of tenant 'default'. Never run like this where anyone else can connect."
)


async def _nothing() -> None:
    return None


# A message fanned out to N viewers has ~N short-lived containers in flight
# (futures, lists, ASGI dicts); with the default first threshold (700) a young
# collection lands mid fan-out, promotes them, and the old generation fills
# with the dead, each full collection walking every open stream's objects.
GC_THRESHOLDS = (50_000, 20, 20)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    temporal = await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings),
        lazy=True,
        # Starts of runs join the request's trace (none when tracing is off).
        interceptors=temporal_interceptors(app.state.tracer_provider),
    )
    bus = MessageBus.from_settings(settings)
    hub = SubscriptionHub(bus.redis)
    archive = RunArchive.from_settings(settings)
    keys = ApiKeyStore.from_settings(settings)
    file_store = FileStore.from_settings(settings)
    await hub.start()  # waits briefly for Redis; keeps retrying in the background
    if settings.archive_enabled:
        try:
            await asyncio.wait_for(archive.ensure_indexes(), STARTUP_TIMEOUT)
        except Exception as exc:
            # Serve what does not need Mongo; /readyz reports it.
            log.warning("archive indexes not ensured at start-up: %s", exc)
    app.state.temporal = temporal
    app.state.bus = bus
    app.state.hub = hub
    app.state.archive = archive
    app.state.catalog = CatalogCache(archive)
    app.state.authenticator = Authenticator(
        settings,
        keys=keys,
        throttle=AuthFailureThrottle(
            bus.redis,
            limit=settings.auth_failure_limit,
            window_seconds=settings.auth_failure_window_seconds,
        ),
    )
    app.state.limits = TenantLimits(bus.redis, settings)
    app.state.files = file_store
    # A2A push notifications: follows watched tasks' runs (protocols.a2a.push_watch).
    push_watcher = PushWatcher(app.state)
    push_watcher.start()
    # Runs Temporal closed without Spindle get their TERMINATED even when nobody
    # is watching them (spindle.shared.temporal.closed_runs).
    app.state.on_run_closed = settle_tasks_hook(app.state)
    sweep = closed_run_sweep(app.state, settings)
    if sweep is not None:
        sweep.start()
    if settings.auth_disabled:
        log.warning(AUTH_DISABLED_BANNER)
    log.info(
        "gateway ready: temporal=%s redis=%s mongo=%s/%s",
        settings.temporal_address,
        redact_url(settings.redis_url),
        redact_url(settings.mongo_url),
        settings.mongo_db,
    )
    # What start-up built (modules, routes, models, clients) lives as long as
    # the process: frozen, a full collection no longer walks it. Under a
    # 1,000-viewer fan-out those walks were 0.2-0.6 s pauses of every stream.
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        async with mcp_sessions(app):  # MCP at /mcp (protocols.mcp)
            yield
    finally:
        # Each bounded: a client stuck on a dead server must not keep the
        # process from exiting when its orchestrator asks it to stop.
        for name, closing in (
            ("a2a push watcher", push_watcher.stop),
            ("closed-run sweep", sweep.stop if sweep is not None else _nothing),
            ("subscription hub", hub.stop),
            ("redis", bus.close),
            ("archive", archive.close),
            ("api keys", keys.close),
            ("file store", file_store.close),
            ("tracing", _flush_traces(app)),
        ):
            try:
                async with asyncio.timeout(SHUTDOWN_STEP_TIMEOUT):
                    await closing()
            except Exception as exc:  # TimeoutError included
                log.warning("shutdown: %s did not close cleanly: %r", name, exc)


def _flush_traces(app: FastAPI) -> Callable[[], Awaitable[None]]:
    async def flush() -> None:
        provider = app.state.tracer_provider
        if provider is not None:
            await asyncio.to_thread(provider.shutdown)

    return flush


def _vertesia_operation_id(route: APIRoute) -> str:
    return f"vertesia_{route.name}"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gateway app (``uvicorn --factory spindle.gateway.app:create_app``).

    Args:
        settings: defaults to the process settings read from the environment.
    """
    settings = settings or get_settings()
    app = SpindleApp(
        title="Spindle",
        summary="Durable AI agent graph runs on Temporal, streamed live over SSE",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.settings = settings
    # Set off by the server on shutdown: open SSE streams end with a retry hint.
    app.state.stream_drain = StreamDrain(settings.sse_shutdown_retry_ms)
    # OTEL_* environment variables turn tracing on (spindle.shared.platform.telemetry).
    app.state.tracer_provider = setup_tracing("spindle-gateway", settings)
    if app.state.tracer_provider is not None:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=app.state.tracer_provider)
    # Fail at build time, not at the first request, when auth is misconfigured.
    Authenticator(settings, keys=None)
    install_problem_handlers(app, identity=get_identity)
    app.add_middleware(
        ContentLengthLimit,
        max_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
    )
    install_access_log_redaction()

    app.include_router(health.router)
    app.include_router(metrics_routes.router)  # GET /metrics (Prometheus)
    install_a2a(app)  # public agent card; the A2A JSON-RPC bridge
    install_mcp(app)  # MCP (streamable HTTP) at /mcp
    app.include_router(runs.router)
    app.include_router(graphs.router)
    app.include_router(conversations.router)  # GET /conversations/{id}/runs
    app.include_router(schedule_routes.router)  # /schedules (docs/schedules.md)
    app.include_router(inbox.router)  # GET /inbox: open prompts the caller may answer
    app.include_router(jsonrpc_routes.router)  # POST / and POST /tasks (seed 003)
    app.include_router(agui_routes.router)  # POST /agui/{graph} (AG-UI 1.0)
    app.include_router(ui.router)  # GET /ui/: the conversation web page (not in OpenAPI)
    # GET /runs/{id}/graph and /runs/{id}/nodes/{node}: before runs.by_run_router.
    app.include_router(run_view.router)
    per_run: list[APIRouter] = [
        # Before runs.by_run_router: /runs/{id}/workstreams is not a {run_id}.
        workstreams.router,
        bundle.router,  # likewise: /runs/{id}/bundle
        history.router,
        fork.router,  # before runs.by_run_router: /runs/{id}/fork is not a {run_id}
        stream.router,
        signals.router,
        runs.by_run_router,
        files.router,
    ]
    for router in per_run:
        app.include_router(router)
        app.include_router(
            router,
            prefix=VERTESIA_PREFIX,
            tags=["@vertesia/client"],
            include_in_schema=True,
            generate_unique_id_function=_vertesia_operation_id,
        )
    return app
