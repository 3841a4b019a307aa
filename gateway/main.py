"""``python -m gateway.main``: serve the gateway with uvicorn (uvloop + httptools)."""

from __future__ import annotations

import logging

import uvicorn

from shared.settings import get_settings

# Open SSE streams never finish on their own: on shutdown give them this long,
# then close them (clients resume with Last-Event-ID).
GRACEFUL_SHUTDOWN_SECONDS = 3


def main() -> None:
    settings = get_settings()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvicorn.run(
        "gateway.app:create_app",
        factory=True,
        host=settings.gateway_host,
        port=settings.gateway_port,
        loop="uvloop",
        http="httptools",
        log_level=settings.log_level.lower(),
        proxy_headers=True,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


if __name__ == "__main__":
    main()
