"""``python -m spindle.gateway.main``: serve the gateway with uvicorn (uvloop + httptools)."""

from __future__ import annotations

from typing import Any

import uvicorn

from spindle.gateway.app import create_app
from spindle.gateway.http.graceful_server import GracefulServer
from spindle.gateway.http.header_limit import bounded_http_protocol
from spindle.gateway.http.stream_drain import StreamDrain
from spindle.shared.platform.logging_setup import configure_logging
from spindle.shared.platform.settings import Settings, get_settings

# Longer than common client pools' idle expiry (httpx: 5 s) so a client never
# sends a request on a connection the server is closing at that very moment;
# and longer than a load balancer's idle timeout (60 s), as proxies expect.
KEEP_ALIVE_SECONDS = 75


def server_config(app: Any, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """The gateway's uvicorn configuration (``overrides``: e.g. a test's port)."""
    options: dict[str, Any] = dict(
        host=settings.gateway_host,
        port=settings.gateway_port,
        loop="uvloop",
        # httptools reads headers of any size; this one stops at max_header_bytes.
        http=bounded_http_protocol(settings.max_header_bytes),
        log_level=settings.log_level.lower(),
        # uvicorn's own loggers propagate to the root handler configure_logging set.
        log_config=None,
        proxy_headers=True,
        # Open SSE streams end at once on shutdown (spindle.gateway.http.graceful_server); this
        # bounds every other request still running.
        timeout_graceful_shutdown=settings.gateway_graceful_shutdown_seconds,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    options.update(overrides)
    return uvicorn.Config(app, **options)


def main() -> None:
    settings = get_settings()
    configure_logging(settings)
    drain = StreamDrain(settings.sse_shutdown_retry_ms)
    app = create_app(settings, stream_drain=drain)
    config = server_config(app, settings)
    GracefulServer(config, drain=drain).run()


if __name__ == "__main__":
    main()
