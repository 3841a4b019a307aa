"""The FastAPI application: ``create_app()`` wires settings, clients and routes.

The lifespan opens one of each client per process, keeps them in the one typed
``GatewayState`` (``spindle.gateway.services.state``) on ``app.state``, and closes
them on the way out: the Temporal client (pydantic data converter; lazy, so the
gateway starts and answers 503 while Temporal is down), the Redis message bus,
the shared pub/sub ``SubscriptionHub``, the Mongo ``RunArchive`` and the rest.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute

from spindle.gateway.api.deps import get_identity
from spindle.gateway.api.routes import (
    bundle,
    compare,
    conversations,
    evaluations,
    files,
    fork,
    graphs,
    health,
    history,
    inbox,
    run_view,
    runs,
    schemas,
    signals,
    stream,
    tools,
    ui,
    workstreams,
)
from spindle.gateway.api.routes import keys as key_routes
from spindle.gateway.api.routes import metrics as metrics_routes
from spindle.gateway.api.routes import schedules as schedule_routes
from spindle.gateway.api.routes.api_docs import install_api_docs
from spindle.gateway.auth.authenticator import Authenticator
from spindle.gateway.auth.throttle import AuthFailureThrottle
from spindle.gateway.http.access_log import install_access_log_redaction
from spindle.gateway.http.body_limit import ContentLengthLimit
from spindle.gateway.http.cors import install_cors
from spindle.gateway.http.problems import install_problem_handlers
from spindle.gateway.http.server_send import SpindleApp
from spindle.gateway.http.stream_drain import StreamDrain
from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.gateway.protocols.a2a import install_a2a
from spindle.gateway.protocols.a2a.push_watch import PushWatcher
from spindle.gateway.protocols.agui import routes as agui_routes
from spindle.gateway.protocols.jsonrpc import routes as jsonrpc_routes
from spindle.gateway.protocols.mcp import install_mcp, mcp_sessions
from spindle.gateway.runs.catalog_cache import CatalogCache
from spindle.gateway.runs.closed import closed_run_sweep, settle_tasks_hook
from spindle.gateway.services.state import STATE_KEY, GatewayState
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.logging_setup import redact_url
from spindle.shared.platform.settings import Settings, get_settings
from spindle.shared.platform.telemetry import setup_tracing, temporal_interceptors
from spindle.shared.store.api_keys import ApiKeyStore
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.shared.tasks.store import TaskStore
from spindle.shared.temporal.client import connect_temporal

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

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


async def _open_state(
    settings: Settings, stream_drain: StreamDrain, tracer_provider: TracerProvider | None
) -> tuple[GatewayState, ApiKeyStore]:
    """One of each client (the API key store beside, which only the authenticator reads)."""
    temporal = await connect_temporal(
        settings,
        lazy=True,
        # Starts of runs join the request's trace (none when tracing is off).
        interceptors=temporal_interceptors(tracer_provider),
    )
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    keys = ApiKeyStore.from_settings(settings)
    throttle = AuthFailureThrottle(
        bus.redis,
        limit=settings.auth_failure_limit,
        window_seconds=settings.auth_failure_window_seconds,
    )
    state = GatewayState(
        settings=settings,
        stream_drain=stream_drain,
        tracer_provider=tracer_provider,
        temporal=temporal,
        bus=bus,
        hub=SubscriptionHub(bus.redis),
        archive=archive,
        catalog=CatalogCache(archive),
        files=FileStore.from_settings(settings),
        limits=TenantLimits(bus.redis, settings),
        authenticator=Authenticator(settings, keys=keys, throttle=throttle),
        # Over the archive's database: one Mongo pool, closed with the archive.
        tasks=TaskStore(archive.database),
        keys=keys,
    )
    return state, keys


async def _connect(state: GatewayState) -> None:
    """Start what must run before the first request; Mongo trouble is logged, not fatal."""
    await state.hub.start()  # waits briefly for Redis; keeps retrying in the background
    if state.settings.archive_enabled:
        try:
            await asyncio.wait_for(state.archive.ensure_indexes(), STARTUP_TIMEOUT)
        except Exception as exc:
            # Serve what does not need Mongo; /readyz reports it.
            log.warning("archive indexes not ensured at start-up: %s", exc)


def _log_ready(settings: Settings) -> None:
    if settings.auth_disabled:
        log.warning(AUTH_DISABLED_BANNER)
    log.info(
        "gateway ready: temporal=%s redis=%s mongo=%s/%s",
        settings.temporal_address,
        redact_url(settings.redis_url),
        redact_url(settings.mongo_url),
        settings.mongo_db,
    )


def _freeze_start_up_objects() -> None:
    """What start-up built (modules, routes, models, clients) lives as long as the
    process: frozen, a full collection no longer walks it. Under a 1,000-viewer
    fan-out those walks were 0.2-0.6 s pauses of every stream."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def _close(closers: list[tuple[str, Callable[[], Awaitable[None]]]]) -> None:
    # Each bounded: a client stuck on a dead server must not keep the
    # process from exiting when its orchestrator asks it to stop.
    for name, closing in closers:
        try:
            async with asyncio.timeout(SHUTDOWN_STEP_TIMEOUT):
                await closing()
        except Exception as exc:  # TimeoutError included
            log.warning("shutdown: %s did not close cleanly: %r", name, exc)


def gateway_lifespan(
    settings: Settings, stream_drain: StreamDrain, tracer_provider: TracerProvider | None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: builds the one ``GatewayState`` and stores it on ``app.state``."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state, keys = await _open_state(settings, stream_drain, tracer_provider)
        await _connect(state)
        # Runs Temporal closed without Spindle get their TERMINATED even when nobody
        # is watching them (spindle.shared.temporal.closed_runs).
        on_closed = settle_tasks_hook(state.temporal, state.bus, state.tasks)
        state.on_run_closed = on_closed
        setattr(app.state, STATE_KEY, state)
        # A2A push notifications: follows watched tasks' runs (protocols.a2a.push_watch).
        push_watcher = PushWatcher(state)
        push_watcher.start()
        sweep = closed_run_sweep(
            settings,
            temporal=state.temporal,
            bus=state.bus,
            archive=state.archive,
            on_closed=on_closed,
        )
        if sweep is not None:
            sweep.start()
        _log_ready(settings)
        _freeze_start_up_objects()
        try:
            async with mcp_sessions(state):  # MCP at /mcp (protocols.mcp)
                yield
        finally:
            await _close(
                [
                    ("a2a push watcher", push_watcher.stop),
                    ("closed-run sweep", sweep.stop if sweep is not None else _nothing),
                    ("subscription hub", state.hub.stop),
                    ("redis", state.bus.close),
                    ("archive", state.archive.close),
                    ("api keys", keys.close),
                    ("file store", state.files.close),
                    ("tracing", _flush_traces(tracer_provider)),
                ]
            )

    return lifespan


def _flush_traces(provider: TracerProvider | None) -> Callable[[], Awaitable[None]]:
    async def flush() -> None:
        if provider is not None:
            await asyncio.to_thread(provider.shutdown)

    return flush


def _vertesia_operation_id(route: APIRoute) -> str:
    return f"vertesia_{route.name}"


def create_app(
    settings: Settings | None = None, *, stream_drain: StreamDrain | None = None
) -> FastAPI:
    """Build the gateway app (``uvicorn --factory spindle.gateway.app:create_app``).

    Args:
        settings: defaults to the process settings read from the environment.
        stream_drain: the notice the server sets off on shutdown (open SSE streams
            end with a retry hint); a new one by default.
    """
    settings = settings or get_settings()
    stream_drain = stream_drain or StreamDrain(settings.sse_shutdown_retry_ms)
    # OTEL_* environment variables turn tracing on (spindle.shared.platform.telemetry).
    tracer_provider = setup_tracing("spindle-gateway", settings)
    app = SpindleApp(
        title="Spindle",
        summary="Durable AI agent graph runs on Temporal, streamed live over SSE",
        version="0.1.0",
        lifespan=gateway_lifespan(settings, stream_drain, tracer_provider),
        # /docs and /redoc from the gateway's own files (routes/api_docs.py), not a CDN.
        docs_url=None,
        redoc_url=None,
    )
    if tracer_provider is not None:
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=tracer_provider)
    # Fail at build time, not at the first request, when auth is misconfigured.
    Authenticator(settings, keys=None)
    install_problem_handlers(app, identity=get_identity)
    app.add_middleware(
        ContentLengthLimit,
        max_bytes=settings.max_body_bytes,
        max_upload_bytes=settings.max_upload_bytes,
    )
    # Last, so it runs first: SPINDLE_CORS_ALLOW_ORIGINS (docs/streaming/embedding.md).
    install_cors(app, settings)
    install_access_log_redaction()

    app.include_router(health.router)
    app.include_router(metrics_routes.router)  # GET /metrics (Prometheus)
    install_a2a(app)  # public agent card; the A2A JSON-RPC bridge
    install_mcp(app)  # MCP (streamable HTTP) at /mcp
    app.include_router(runs.router)
    app.include_router(graphs.router)
    app.include_router(schemas.router)  # GET /schemas/execution-payload (public)
    app.include_router(tools.router)  # GET /tools (docs/graphs/tools.md)
    app.include_router(conversations.router)  # GET /conversations/{id}/runs
    app.include_router(schedule_routes.router)  # /schedules (docs/schedules.md)
    app.include_router(inbox.router)  # GET /inbox: open prompts the caller may answer
    app.include_router(key_routes.router)  # /keys: the tenant's API keys (key_admin_roles)
    app.include_router(jsonrpc_routes.router)  # POST / and POST /tasks (seed 003)
    app.include_router(agui_routes.router)  # POST /agui/{graph} (AG-UI 1.0)
    app.include_router(ui.router)  # GET /ui/: the conversation web page (not in OpenAPI)
    install_api_docs(app)  # GET /docs, /redoc: offline Swagger UI and ReDoc
    # GET /runs/{id}/graph and /runs/{id}/nodes/{node}: before runs.by_run_router.
    app.include_router(run_view.router)
    app.include_router(compare.router)  # GET /runs/{a}/compare/{b} (docs/replay-and-compare.md)
    app.include_router(evaluations.router)  # /evaluations (docs/replay-and-compare.md)
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
