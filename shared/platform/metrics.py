"""Prometheus metrics with seed 001's names, and the hooks that move them.

One ``CollectorRegistry`` per process (``REGISTRY``); the gateway serves it on
``GET /metrics`` and the worker on its metrics port (``spindle.worker.telemetry.metrics_server``).
Every process registers every metric, but each moves only those it sees:

- gateway: ``agent_runs_started_total``, the stream-health metrics
  (``spindle_sse_*``), and from its closed-run sweep
  ``spindle_runs_closed_outside_total{outcome}`` and the history-budget gauges
  ``spindle_run_history_*`` (largest history among the open runs it saw);
- worker: ``agent_runs_completed_total{outcome}``,
  ``agent_node_executions_total{nodeType,status}``,
  ``agent_node_duration_seconds{nodeType}``, ``agent_runs_inflight``,
  ``agent_items_queue_length``, ``agent_prompts_pending``, and the spend counters
  ``agent_llm_tokens_total{tenant,graph,kind}``, ``agent_tool_calls_total{tenant,graph}``
  and ``agent_llm_cost_usd_total{tenant,graph}``.

The three gauges are per worker process: ``agent_runs_inflight`` counts the runs
this process has executed a node of and not yet finished (a run whose finish
runs on another worker stays counted here until the process restarts);
``agent_items_queue_length`` counts the ``map`` items (seed 001's items) this
process's batches hold and have not finished — waiting for a slot under the
map's ``concurrency`` or running; ``agent_prompts_pending`` counts the HITL
prompts this process has asked and not yet seen answered (or their run
finished). Sum them over workers for a fleet-wide view.
"""

from __future__ import annotations

from typing import TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

# No ``*_created`` series: scrapers do not need them and they double the output.
disable_created_metrics()  # type: ignore[no-untyped-call]
_K = TypeVar("_K")

REGISTRY = CollectorRegistry(auto_describe=True)
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Node latencies range from microseconds (routers) to minutes (LLM turns, tools).
NODE_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)

RUNS_STARTED = Counter(
    "agent_runs_started_total",
    "Runs started (new Temporal executions; idempotent replays excluded)",
    registry=REGISTRY,
)
RUNS_COMPLETED = Counter(
    "agent_runs_completed_total",
    "Runs finished, by outcome (completed, failed, canceled, terminated, timed_out)",
    ["outcome"],
    registry=REGISTRY,
)
NODE_EXECUTIONS = Counter(
    "agent_node_executions_total",
    "Node executions reported, by node type and status (SUCCESS, FAILED, SKIPPED)",
    ["nodeType", "status"],
    registry=REGISTRY,
)
NODE_DURATION = Histogram(
    "agent_node_duration_seconds",
    "Duration of node executions, by node type",
    ["nodeType"],
    buckets=NODE_DURATION_BUCKETS,
    registry=REGISTRY,
)
RUNS_INFLIGHT = Gauge(
    "agent_runs_inflight",
    "Runs this worker process has executed a node of and not yet finished",
    registry=REGISTRY,
)
ITEMS_QUEUE_LENGTH = Gauge(
    "agent_items_queue_length",
    "Map items this worker process's batches hold and have not finished (queued or running)",
    registry=REGISTRY,
)
PROMPTS_PENDING = Gauge(
    "agent_prompts_pending",
    "HITL prompts this worker process has asked and not yet seen answered",
    registry=REGISTRY,
)
SSE_STREAMS_OPEN = Gauge(
    "spindle_sse_streams_open",
    "SSE message streams this gateway process is serving now",
    registry=REGISTRY,
)
SSE_MESSAGES_DELIVERED = Counter(
    "spindle_sse_messages_delivered_total",
    "Messages written to SSE clients (backlog and live)",
    registry=REGISTRY,
)
SSE_RECONNECTS = Counter(
    "spindle_sse_reconnects_total",
    "SSE streams opened with a Last-Event-ID (header or lastEventId query)",
    registry=REGISTRY,
)
RUNS_CLOSED_OUTSIDE = Counter(
    "spindle_runs_closed_outside_total",
    "Runs Temporal closed without Spindle (terminate/cancel from Temporal, limits, "
    "timeouts), noticed and ended on their stream, by outcome",
    ["outcome"],
    registry=REGISTRY,
)
RUN_HISTORY_EVENTS_MAX = Gauge(
    "spindle_run_history_events_max",
    "Largest Temporal history length (events) among the open runs last swept",
    registry=REGISTRY,
)
RUN_HISTORY_BYTES_MAX = Gauge(
    "spindle_run_history_bytes_max",
    "Largest Temporal history size (bytes) among the open runs last swept",
    registry=REGISTRY,
)
RUNS_HISTORY_OVER_HALF = Gauge(
    "spindle_runs_history_over_half",
    "Open runs last swept whose history passed half of Temporal's event or size limit",
    registry=REGISTRY,
)

LLM_TOKENS = Counter(
    "agent_llm_tokens_total",
    "LLM tokens the runs used, by tenant, graph and kind (prompt, completion)",
    ["tenant", "graph", "kind"],
    registry=REGISTRY,
)
TOOL_CALLS = Counter(
    "agent_tool_calls_total",
    "Tool calls the runs made (agent tool calls, tool nodes, map items), by tenant and graph",
    ["tenant", "graph"],
    registry=REGISTRY,
)
LLM_COST = Counter(
    "agent_llm_cost_usd_total",
    "Cost in USD of the runs' LLM turns (tokens times SPINDLE_MODEL_PRICES), by tenant and graph",
    ["tenant", "graph"],
    registry=REGISTRY,
)

# Bounded: a run that finishes on another worker is never discarded here, and a
# long-lived process must not keep one entry per such run for ever.
MAX_TRACKED = 100_000

_inflight_runs: dict[str, None] = {}
_pending_prompts: dict[tuple[str, str], None] = {}


def _track(entries: dict[_K, None], key: _K) -> None:
    """Add ``key`` (dicts keep insertion order: the oldest go first when full)."""
    entries[key] = None
    while len(entries) > MAX_TRACKED:
        del entries[next(iter(entries))]


def render() -> bytes:
    """The registry in Prometheus text format (``CONTENT_TYPE``)."""
    return generate_latest(REGISTRY)


def run_started() -> None:
    """A new run was started (gateway, after Temporal accepted it)."""
    RUNS_STARTED.inc()


def node_executed(workflow_id: str, node_type: str, status: str, duration_ms: float) -> None:
    """A node report was recorded (worker); its run counts as in flight here."""
    NODE_EXECUTIONS.labels(nodeType=node_type, status=status).inc()
    NODE_DURATION.labels(nodeType=node_type).observe(max(0.0, duration_ms) / 1000)
    _track(_inflight_runs, workflow_id)
    RUNS_INFLIGHT.set(len(_inflight_runs))


def llm_used(tenant: str, graph: str, prompt: int, completion: int, cost_usd: float) -> None:
    """One LLM turn's tokens and cost (worker, ``llm_turn``)."""
    LLM_TOKENS.labels(tenant=tenant, graph=graph, kind="prompt").inc(prompt)
    LLM_TOKENS.labels(tenant=tenant, graph=graph, kind="completion").inc(completion)
    LLM_COST.labels(tenant=tenant, graph=graph).inc(cost_usd)


def tool_called(tenant: str, graph: str, count: int = 1) -> None:
    """Tool calls made (worker: ``tool_call``, a ``tool`` node, a map's items)."""
    TOOL_CALLS.labels(tenant=tenant, graph=graph).inc(count)


def prompt_asked(workflow_id: str, node_id: str) -> None:
    """A HITL prompt is waiting for its answer (idempotent under retries)."""
    _track(_pending_prompts, (workflow_id, node_id))
    PROMPTS_PENDING.set(len(_pending_prompts))


def prompts_answered(workflow_id: str) -> None:
    """The run's pending prompt was answered, or the run ended (idempotent)."""
    for key in [k for k in _pending_prompts if k[0] == workflow_id]:
        del _pending_prompts[key]
    PROMPTS_PENDING.set(len(_pending_prompts))


def items_queued(count: int) -> None:
    """A map batch took ``count`` items to run (worker, ``run_item_batch``)."""
    ITEMS_QUEUE_LENGTH.inc(count)


def items_finished(count: int = 1) -> None:
    """``count`` of a batch's items finished (answered or failed), or were dropped."""
    ITEMS_QUEUE_LENGTH.dec(count)


def run_finished(workflow_id: str, outcome: str) -> None:
    """A run ended with ``outcome`` (worker, once its closing messages are out)."""
    RUNS_COMPLETED.labels(outcome=outcome).inc()
    _inflight_runs.pop(workflow_id, None)
    RUNS_INFLIGHT.set(len(_inflight_runs))
    prompts_answered(workflow_id)


def stream_opened(*, resumed: bool) -> None:
    """An SSE stream started sending (``resumed``: it came with a Last-Event-ID)."""
    SSE_STREAMS_OPEN.inc()
    if resumed:
        SSE_RECONNECTS.inc()


def stream_closed() -> None:
    """An SSE stream that ``stream_opened`` counted has ended."""
    SSE_STREAMS_OPEN.dec()


def messages_delivered(count: int) -> None:
    """``count`` messages were written to an SSE client."""
    if count > 0:
        SSE_MESSAGES_DELIVERED.inc(count)


def run_closed_outside(outcome: str) -> None:
    """Temporal closed a run without Spindle, and its stream was ended for it."""
    RUNS_CLOSED_OUTSIDE.labels(outcome=outcome).inc()


def history_observed(usage: list[tuple[int, int]], events_limit: int, bytes_limit: int) -> None:
    """The (events, bytes) history usage of every open run one sweep described."""
    RUN_HISTORY_EVENTS_MAX.set(max((events for events, _ in usage), default=0))
    RUN_HISTORY_BYTES_MAX.set(max((size for _, size in usage), default=0))
    RUNS_HISTORY_OVER_HALF.set(
        sum(1 for events, size in usage if events * 2 > events_limit or size * 2 > bytes_limit)
    )
