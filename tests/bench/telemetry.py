"""The telemetry section: what archiving, tracing and metrics cost per graph node.

The same chain of ``nodes`` no-op ``tool`` nodes runs on an in-process worker in
two configurations, alternating, median of ``repeat`` runs each (after one
warm-up run each):

- **bare**: archive off (``archive=None``), no tracing interceptor, no metrics
  runtime or endpoint;
- **observed**: the MongoDB archive on (runs, messages, node reports), the
  Temporal ``TracingInterceptor`` on a ``TracerProvider`` whose
  ``BatchSpanProcessor`` exports OTLP/HTTP to a local dummy receiver (it counts
  the export requests and answers 200), the Temporal SDK Prometheus runtime and
  Spindle's own ``/metrics`` endpoint (scraped once at the end).

Nothing is asserted about times.
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.temporal.converter import data_converter


class _Receiver(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that accepts and counts export requests."""

    exports = 0
    bytes_received = 0

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        type(self).exports += 1
        type(self).bytes_received += len(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def otlp_receiver() -> Iterator[str]:
    """A dummy OTLP/HTTP receiver on a free loopback port; yields its traces URL."""
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


async def _run_ms(client: Client, spec: Any, task_queue: str, nodes: int) -> float:
    start = time.perf_counter()
    result = await client.execute_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, input={}),
        id=f"bench-tel-{uuid.uuid4()}",
        task_queue=task_queue,
        result_type=GraphRunResult,
    )
    if result.status != "completed":
        raise RuntimeError(f"bench graph ended {result.status}: {result.error}")
    return (time.perf_counter() - start) * 1000 / nodes


async def bench_telemetry(
    client: Client, settings: Settings, graph: dict[str, Any], *, nodes: int, repeat: int
) -> dict[str, Any]:
    """The section's figures (see the module docstring); ``graph`` is the chain spec."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from spindle.shared.graphs.structure import parse_graph
    from spindle.shared.platform.telemetry import temporal_interceptors
    from spindle.worker.main import build_worker
    from spindle.worker.offerings import load_tools
    from spindle.worker.telemetry.metrics_server import sdk_metrics_runtime, serve_metrics
    from spindle.worker.tools.registry import tool

    if "bench_echo" not in load_tools():  # the chain's node body (as in the nodes section)

        @tool(name="bench_echo")
        def bench_echo(value: int = 0) -> int:
            """Return the value (a no-op node body)."""
            return value

    spec = parse_graph(graph)
    metrics_settings = settings.model_copy(update={"worker_metrics_port": free_port()})
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    bare: list[float] = []
    observed: list[float] = []
    with otlp_receiver() as endpoint:
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: "spindle-bench"}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
        runtime: Runtime | None = sdk_metrics_runtime(metrics_settings)
        if runtime is None:  # the SDK port was taken: still measure with a runtime
            runtime = Runtime(
                telemetry=TelemetryConfig(
                    metrics=PrometheusConfig(bind_address=f"127.0.0.1:{free_port()}")
                )
            )
        traced = await Client.connect(
            client.service_client.config.target_host,
            data_converter=data_converter(settings),
            runtime=runtime,
            interceptors=temporal_interceptors(provider),
        )
        bare_worker = build_worker(client, settings, bus=bus, archive=None, task_queue="bench-bare")
        observed_worker = build_worker(
            traced, settings, bus=bus, archive=archive, task_queue="bench-observed"
        )
        async with bare_worker, observed_worker, serve_metrics(metrics_settings) as port:
            await _run_ms(client, spec, "bench-bare", nodes)
            await _run_ms(traced, spec, "bench-observed", nodes)
            for _ in range(repeat):
                bare.append(await _run_ms(client, spec, "bench-bare", nodes))
                observed.append(await _run_ms(traced, spec, "bench-observed", nodes))
            scraped = 0
            if port is not None:
                async with httpx.AsyncClient(timeout=10) as http:
                    scraped = len((await http.get(f"http://127.0.0.1:{port}/metrics")).content)
        provider.force_flush()
        provider.shutdown()
        exports = _Receiver.exports
    await bus.close()
    await archive.close()
    bare_ms = statistics.median(bare)
    observed_ms = statistics.median(observed)
    return {
        "nodes_per_run": nodes,
        "bare_node_ms": round(bare_ms, 2),
        "observed_node_ms": round(observed_ms, 2),
        "observed_to_bare_ratio": round(observed_ms / bare_ms, 2),
        "otlp_export_requests": exports,
        "metrics_scrape_bytes": scraped,
    }
