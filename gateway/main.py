"""``python -m gateway.main``: serve the gateway with uvicorn (uvloop + httptools)."""

from __future__ import annotations

import uvicorn

from shared.logging_setup import configure_logging
from shared.settings import get_settings

# Open SSE streams never finish on their own: on shutdown give them this long,
# then close them (clients resume with Last-Event-ID).
GRACEFUL_SHUTDOWN_SECONDS = 3
# Longer than common client pools' idle expiry (httpx: 5 s) so a client never
# sends a request on a connection the server is closing at that very moment;
# and longer than a load balancer's idle timeout (60 s), as proxies expect.
KEEP_ALIVE_SECONDS = 75


def main() -> None:
    settings = get_settings()
    configure_logging(settings)
    uvicorn.run(
        "gateway.app:create_app",
        factory=True,
        host=settings.gateway_host,
        port=settings.gateway_port,
        loop="uvloop",
        http="httptools",
        log_level=settings.log_level.lower(),
        # uvicorn's own loggers propagate to the root handler configure_logging set.
        log_config=None,
        proxy_headers=True,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )


if __name__ == "__main__":
    main()
