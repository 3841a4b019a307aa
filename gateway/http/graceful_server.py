"""uvicorn's server with a shutdown that suits an orchestrated gateway.

On SIGTERM (Kubernetes stopping the pod, a rolling update) or SIGINT it stops
accepting connections, then ends every open SSE stream at once with a
``retry:`` hint (``spindle.gateway.http.stream_drain``) instead of leaving them open until
the graceful-shutdown timeout cuts them mid-response; other requests get
``Settings.gateway_graceful_shutdown_seconds`` to finish. A shutdown that
completed is a success: the process exits 0 rather than re-raising the signal
as stock uvicorn does (a death by SIGTERM, status 143, reads as a failure).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Iterator

import uvicorn

from spindle.gateway.http.stream_drain import StreamDrain

log = logging.getLogger(__name__)

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GracefulServer(uvicorn.Server):
    """A ``uvicorn.Server`` that drains SSE streams first and exits 0 on a signal.

    Args:
        config: the uvicorn configuration (its app owns ``drain``).
        drain: the app's ``StreamDrain`` (given to ``create_app``).
    """

    def __init__(self, config: uvicorn.Config, *, drain: StreamDrain) -> None:
        super().__init__(config)
        self.drain = drain

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Listeners first, so a client told to reconnect cannot land here again.
        for server in self.servers:
            server.close()
        count = self.drain.begin()
        log.info("gateway stopping: ending %d open stream(s) with a retry hint", count)
        await super().shutdown(sockets=sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Handle SIGINT/SIGTERM as a request to stop; restore the handlers after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
