"""A Temporal client whose spans land in an in-memory exporter, for trace tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from spindle.shared.platform.settings import Settings
from spindle.shared.platform.telemetry import temporal_interceptors
from spindle.shared.temporal.client import connect_temporal


@asynccontextmanager
async def traced_temporal_client(
    settings: Settings, spans: InMemorySpanExporter
) -> AsyncIterator[Client]:
    """A client with Temporal's tracing interceptor, exporting to ``spans``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    client = await connect_temporal(settings, interceptors=temporal_interceptors(provider))
    try:
        yield client
    finally:
        provider.shutdown()


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with ``prefix`` (``RunActivity:``, ``RunWorkflow:``)."""
    return [span for span in spans if span.name.startswith(prefix)]
