"""OpenTelemetry traces: one trace from the REST request to each node's activity.

Tracing is configured by the standard ``OTEL_*`` environment variables, not by
Spindle settings: spans are exported over OTLP/HTTP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is
set, and nothing is traced when neither is set or ``OTEL_SDK_DISABLED=true``.
``OTEL_SERVICE_NAME`` overrides the process's default service name.

Temporal carries the trace across processes: the client and the worker both use
``temporalio.contrib.opentelemetry.TracingInterceptor`` (see
:func:`temporal_interceptors`), so the gateway's ``StartWorkflow`` span is the
parent of the workflow's ``RunWorkflow`` span and of every activity span.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from temporalio.client import Interceptor
from temporalio.contrib.opentelemetry import TracingInterceptor

from spindle.shared.platform.settings import Settings

TRACER_NAME = "spindle"
_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def tracing_requested() -> bool:
    """Whether the environment asks for spans to be exported."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name, "").strip() for name in _ENDPOINT_VARIABLES)


def setup_tracing(service_name: str, settings: Settings) -> TracerProvider | None:
    """A tracer provider exporting over OTLP/HTTP, or None when tracing is off.

    The provider also becomes the process's global one (libraries that trace
    on their own use it). Call ``shutdown()`` on it when the process stops, so
    the last spans are flushed.

    Args:
        service_name: ``service.name`` unless ``OTEL_SERVICE_NAME`` is set.
        settings: the process settings (the task queue is recorded on the resource).
    """
    if not tracing_requested():
        return None
    # Imported here: only processes that export pay for the exporter's imports.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    name = os.environ.get("OTEL_SERVICE_NAME", "").strip() or service_name
    # Resource.create also reads OTEL_RESOURCE_ATTRIBUTES.
    resource = Resource.create({SERVICE_NAME: name, "spindle.task_queue": settings.task_queue})
    provider = TracerProvider(resource=resource)
    # The exporter reads its endpoint, headers and timeout from OTEL_EXPORTER_OTLP_*.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider


def temporal_interceptors(provider: TracerProvider | None) -> list[Interceptor]:
    """The Temporal client interceptors for ``provider`` (none when tracing is off).

    A worker built on a client with these interceptors uses them too, so its
    workflow and activity spans join the trace of whoever started the run.
    """
    if provider is None:
        return []
    return [TracingInterceptor(provider.get_tracer(TRACER_NAME))]


def item_count(payload: Any) -> int:
    """How many items a node's output holds: a list's length, else 1."""
    return len(payload) if isinstance(payload, list) else 1


def annotate_node_span(
    *,
    run_id: str,
    node_id: str,
    node_type: str,
    status: str,
    item_count: int,
    duration_ms: float,
) -> None:
    """Set seed 001's node attributes on the current span (the activity's)."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attributes(
        {
            "runId": run_id,
            "nodeId": node_id,
            "nodeType": node_type,
            "status": status,
            "itemCount": item_count,
            "durationMs": duration_ms,
        }
    )


def current_trace_ids() -> dict[str, str]:
    """``{"traceId", "spanId"}`` of the current span (hex, as log lines carry
    them), or ``{}`` when no span is current (tracing off)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {
        "traceId": trace.format_trace_id(context.trace_id),
        "spanId": trace.format_span_id(context.span_id),
    }


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the current span, or None when none is recorded.

    The gateway stores it with a run at start, so that later requests about the
    run (answers, steering) can join the run's trace.
    """
    if not trace.get_current_span().is_recording():
        return None
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")


@contextmanager
def joined_run_trace(
    name: str, *, run_id: str, traceparent: str | None, attributes: dict[str, Any] | None = None
) -> Iterator[None]:
    """Make what runs inside part of a run's trace.

    Starts span ``name`` as a child of ``traceparent`` (the span that started
    the run) and makes it current, so Temporal's client interceptor puts its
    ``StartWorkflowUpdate`` / ``SignalWorkflow`` span in the run's trace too.
    The span links to the span that was current before (the HTTP request of
    the answer), so each trace leads to the other. Does nothing when no span is
    being recorded here (tracing off) or the run has no ``traceparent``.
    """
    caller = trace.get_current_span()
    if not traceparent or not caller.is_recording():
        yield
        return
    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    if not trace.get_current_span(parent).get_span_context().is_valid:
        yield
        return
    tracer = trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(
        name,
        context=parent,
        kind=trace.SpanKind.INTERNAL,
        links=[trace.Link(caller.get_span_context())],
        attributes={"runId": run_id, **(attributes or {})},
    ):
        yield
