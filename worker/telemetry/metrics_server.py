"""The worker's metrics endpoints: ours (``shared.platform.metrics``) and the Temporal SDK's.

Ours are served by a tiny asyncio HTTP server on ``worker_metrics_port`` that
answers every GET with the registry in Prometheus text format, so it stops with
the worker (``prometheus_client.start_http_server`` would leave a thread behind).
The SDK's metrics come from its Rust core, which runs its own exporter: they
cannot join our registry, so they get the next port through the Temporal
``Runtime`` the worker's client is connected with.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from spindle.shared.platform import metrics
from spindle.shared.platform.settings import Settings

logger = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
MAX_REQUEST_HEAD = 16 * 1024


def sdk_metrics_runtime(settings: Settings) -> Runtime | None:
    """A Temporal runtime exporting SDK metrics on ``worker_metrics_port + 1``.

    Returns:
        None when metrics are off or the port cannot be bound (logged): the
        worker then runs on the default runtime, without SDK metrics.
    """
    if settings.worker_metrics_port == 0:
        return None
    address = f"{settings.worker_metrics_host}:{settings.worker_metrics_port + 1}"
    try:
        runtime = Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=address, durations_as_seconds=True)
            )
        )
    except ValueError as exc:
        logger.warning("Temporal SDK metrics are off: %s", exc)
        return None
    logger.info("Temporal SDK metrics on http://%s/metrics", address)
    return runtime


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        async with asyncio.timeout(READ_TIMEOUT):
            head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_REQUEST_HEAD or not head.startswith(b"GET "):
            status, body, kind = b"405 Method Not Allowed", b"", b"text/plain"
        else:
            status, body, kind = b"200 OK", metrics.render(), metrics.CONTENT_TYPE.encode()
        writer.write(
            b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
            % (status, kind, len(body))
            + body
        )
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        pass  # a scraper that went away or sent garbage: nothing to answer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


@contextlib.asynccontextmanager
async def serve_metrics(settings: Settings) -> AsyncIterator[int | None]:
    """Serve ``spindle.shared.platform.metrics`` while the context is open.

    Yields:
        The bound port, or None when off (port 0) or the port is taken (logged:
        a busy port must not keep the worker from running).
    """
    if settings.worker_metrics_port == 0:
        yield None
        return
    try:
        server = await asyncio.start_server(
            _answer, settings.worker_metrics_host, settings.worker_metrics_port
        )
    except OSError as exc:
        logger.warning("worker metrics are not served: %s", exc)
        yield None
        return
    port: int = server.sockets[0].getsockname()[1]
    logger.info("worker metrics on http://%s:%d/metrics", settings.worker_metrics_host, port)
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()
