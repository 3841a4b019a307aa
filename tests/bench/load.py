"""The bounded load run: N graph runs started at once over HTTP, one SSE client per run.

One worker process and one gateway process, started fresh for this section so
their peak RSS is the load's own, run on the benchmark's Temporal dev server,
Redis and Mongo wire server. Each client POSTs ``/runs`` of an example graph
(offline LLM), then reads ``/runs/{wf}/{run}/stream`` from the start until the
run's final COMPLETE, checking that the SSE ids are exactly 1, 2, 3 … with
none missing or repeated.

Delivery latency is client receive time minus the message's ``ts``. Both are
wall-clock epoch ms on this one machine: ``ts`` is Redis ``TIME`` at append,
truncated to the ms (or later, bumped by 1 ms on a tie), the client reads
``time.time()``, so a figure may be up to 1 ms high (or, after a tie, low).
Messages already stored when the client's stream opened are replayed from the
backlog; their latency includes the time before the client attached, so they
are reported apart from the live ones. The live ones are also reported for the
steady state alone: posted after every start was answered, when the burst of
POSTs and stream opens no longer competes for the same cores.

The whole section (floors, process start, warm-up, load, RSS) runs under a
deadline; past it, ``LoadBudgetExceeded`` says how far the load got.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from temporalio.client import Client
from temporalio.worker import Worker

from tests.bench.floor import BareActivities, NoopBatch, bench_noop, redis_pubsub_latencies
from tests.bench.stack import BenchStack

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "worker" / "examples"
LOAD_INPUTS: dict[str, dict[str, Any]] = {
    "research-agent": {"question": "How long does Temporal keep a workflow history?"},
    "pipeline": {"text": "The deploy failed again and users are angry"},
}
TASK_QUEUE = "bench-load"
COMPLETE, TERMINATED = 4, 11  # AgentMessageType values (wire contract)
WARM_UP_RUNS = 2


class LoadBudgetExceeded(RuntimeError):
    """The load section did not finish within its deadline."""


class LoadErrors(RuntimeError):
    """The load could not be carried out: the warm-up failed or a process died."""


@dataclass(frozen=True)
class LoadOptions:
    """Flags of the load section."""

    runs: int = 200
    concurrency: int = 200
    graph: str = "pipeline"
    budget_s: float = 180.0


@dataclass
class RunTally:
    """What one client saw of one run."""

    post_sent: float = 0.0  # epoch s (time.time(), the clock of message ts)
    post_done: float = 0.0
    finished: float = 0.0
    seqs: list[int] = field(default_factory=list)
    live: list[tuple[int, float]] = field(default_factory=list)  # (ts, latency ms)
    backlog_ms: list[float] = field(default_factory=list)
    status: str | None = None
    error: str | None = None

    @property
    def messages(self) -> int:
        return len(self.seqs)

    def seq_faults(self) -> tuple[int, int, int]:
        """(missing, duplicate, out of order) SSE ids; a full replay starts at 1."""
        unique = set(self.seqs)
        duplicate = len(self.seqs) - len(unique)
        missing = (max(unique) - len(unique)) if unique else 0
        out_of_order = sum(1 for a, b in zip(self.seqs, self.seqs[1:], strict=False) if b <= a)
        return missing, duplicate, out_of_order


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def peak_rss_mib(pid: int) -> float:
    """``VmHWM`` (peak resident set) of a live process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no VmHWM in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a live process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def one_run(
    http: httpx.AsyncClient, body: dict[str, Any], gate: asyncio.Semaphore, tally: RunTally
) -> None:
    """Start one run and follow its stream to the end, recording into ``tally``."""
    async with gate:
        try:
            await _start_and_follow(http, body, tally)
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            phase = "stream" if tally.post_done else "POST /runs"
            since = time.time() - (tally.post_done or tally.post_sent)
            phase += f" after {since:.3f}s"
            tally.error = f"{phase}: {type(exc).__name__}: {exc}"
        tally.finished = time.time()


async def _start_and_follow(http: httpx.AsyncClient, body: dict[str, Any], tally: RunTally) -> None:
    tally.post_sent = time.time()
    reply = await http.post("/runs", json=body)
    tally.post_done = time.time()
    if not reply.is_success:
        tally.error = f"POST /runs {reply.status_code}: {reply.text[:200]}"
        return
    started = reply.json()
    path = f"/runs/{started['workflow_id']}/{started['run_id']}/stream"
    async with http.stream("GET", path) as stream:
        if stream.status_code != 200:
            await stream.aread()
            tally.error = f"GET stream {stream.status_code}: {stream.text[:200]}"
            return
        opened_ms = time.time() * 1000
        seq: int | None = None
        async for line in stream.aiter_lines():
            if line.startswith("id:"):
                seq = int(line[3:])
            elif line.startswith("data:"):
                received_ms = time.time() * 1000
                message = json.loads(line[5:])
                if seq is None:
                    tally.error = "data without an id"
                    return
                tally.seqs.append(seq)
                seq = None
                ts = message["ts"]
                if ts >= opened_ms:
                    tally.live.append((ts, received_ms - ts))
                else:
                    tally.backlog_ms.append(received_ms - ts)
                ends = message["t"] in (COMPLETE, TERMINATED) and "w" not in message
                if ends:
                    details = message.get("d") or {}
                    tally.status = details.get("status", "terminated")
                    return
    tally.error = "stream ended before the run's COMPLETE"


async def watch_loop_lag(lag_ms: list[float], period: float = 0.01) -> None:
    """Record how late this event loop wakes up (until cancelled).

    The clients share one loop with 2 cores' worth of servers beside them; a
    late wake-up here is time the clients add to every latency they measure.
    """
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + period
        await asyncio.sleep(period)  # a measuring tick, not a wait for an event
        lag_ms.append((loop.time() - due) * 1000)


async def run_load(
    base_url: str,
    graph: str,
    tallies: list[RunTally],
    concurrency: int,
    lag_ms: list[float] | None = None,
) -> float:
    """One run per tally (at most ``concurrency`` in flight); return the start time.

    The tallies fill in as clients see messages, so a caller that cancels this
    still has what was seen. ``lag_ms`` collects the client loop's lag.
    """
    body = {"graph": graph, "input": LOAD_INPUTS[graph]}
    timeout = httpx.Timeout(60.0, connect=10.0)
    # Idle connections expire well before uvicorn's 5 s keep-alive timeout: at
    # httpx's default (also 5 s) a request sometimes went out on a connection the
    # server was closing, and failed with "Server disconnected without sending a
    # response" (the keep-alive race of HTTP/1.1, not a gateway fault).
    limits = httpx.Limits(max_connections=concurrency + 16, keepalive_expiry=1.0)
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=limits) as http:
        watcher = asyncio.create_task(watch_loop_lag(lag_ms if lag_ms is not None else []))
        t0 = time.time()
        try:
            await asyncio.gather(*(one_run(http, body, gate, t) for t in tallies))
        finally:
            watcher.cancel()
    return t0


def summarize(tallies: list[RunTally], t0: float) -> dict[str, Any]:
    """Figures of one load run."""
    starts_end = max(t.post_done for t in tallies)
    last_complete = max(t.finished for t in tallies)
    live = [ms for t in tallies for _, ms in t.live]
    steady = [ms for t in tallies for ts, ms in t.live if ts > starts_end * 1000]
    every = live + [ms for t in tallies for ms in t.backlog_ms]
    messages = sum(t.messages for t in tallies)
    faults = [t.seq_faults() for t in tallies]
    errors = {
        "http_or_stream": sum(1 for t in tallies if t.error),
        "missing_seq": sum(f[0] for f in faults),
        "duplicate_seq": sum(f[1] for f in faults),
        "out_of_order_seq": sum(f[2] for f in faults),
        "run_not_completed": sum(1 for t in tallies if not t.error and t.status != "completed"),
    }
    durations = [(t.finished - t.post_sent) * 1000 for t in tallies if not t.error]
    return {
        "starts_s": round(starts_end - t0, 3),
        "runs_per_s_started": round(len(tallies) / (starts_end - t0), 1),
        "load_wall_s": round(last_complete - t0, 2),
        "messages": messages,
        "messages_per_run": round(messages / len(tallies), 1),
        "messages_per_s": round(messages / (last_complete - t0), 1),
        "live_messages": len(live),
        "delivery_p50_ms": round(pct(live, 0.5), 1),
        "delivery_p99_ms": round(pct(live, 0.99), 1),
        "steady_messages": len(steady),
        "steady_p50_ms": round(pct(steady, 0.5), 1),
        "steady_p99_ms": round(pct(steady, 0.99), 1),
        "delivery_all_p50_ms": round(pct(every, 0.5), 1),
        "delivery_all_p99_ms": round(pct(every, 0.99), 1),
        "run_p50_ms": round(pct(durations, 0.5), 1),
        "run_p99_ms": round(pct(durations, 0.99), 1),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "first_error": next((t.error for t in tallies if t.error), None),
    }


async def measure_floors(client: Client, redis_url: str) -> dict[str, float]:
    """Bare Temporal activity and bare Redis publish → subscribe, measured now."""
    async with Worker(
        client, task_queue="bench-load-floor", workflows=[BareActivities], activities=[bench_noop]
    ):
        for count in (5, 30):  # the first batch warms up the worker
            start = time.perf_counter()
            await client.execute_workflow(
                BareActivities.run,
                NoopBatch(count=count),
                id=f"load-floor-{uuid.uuid4()}",
                task_queue="bench-load-floor",
            )
            activity_ms = (time.perf_counter() - start) * 1000 / count
    pubsub = await redis_pubsub_latencies(redis_url, 300)
    return {
        "bare_activity_ms": round(activity_ms, 2),
        "redis_pubsub_p50_ms": round(pct(pubsub, 0.5), 3),
        "redis_pubsub_p99_ms": round(pct(pubsub, 0.99), 3),
    }


async def _register(base_url: str, graph: str) -> None:
    spec = yaml.safe_load((EXAMPLES_DIR / f"{graph}.yaml").read_text())
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        reply = await http.put(f"/graphs/{graph}", json=spec)
        if not reply.is_success:
            raise RuntimeError(f"PUT /graphs/{graph} {reply.status_code}: {reply.text[:300]}")


async def _section(
    stack: BenchStack,
    client: Client,
    redis_url: str,
    options: LoadOptions,
    tallies: list[RunTally],
) -> dict[str, Any]:
    floors = await measure_floors(client, redis_url)
    worker = await stack.worker("load-worker", client, task_queue=TASK_QUEUE)
    gateway, base_url = stack.gateway("load-gateway", task_queue=TASK_QUEUE)
    assert worker.pid is not None and gateway.pid is not None
    await _register(base_url, options.graph)
    warm = [RunTally() for _ in range(WARM_UP_RUNS)]
    await run_load(base_url, options.graph, warm, WARM_UP_RUNS)
    if any(t.error or t.status != "completed" for t in warm):
        detail = next(t.error or t.status for t in warm if t.error or t.status != "completed")
        raise LoadErrors(f"warm-up run failed: {detail}\n{gateway.log_tail()}")
    lag_ms: list[float] = []
    pids = {p.name.split()[0]: p.pid for p in stack.processes if p.pid and p.alive()}
    cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    client_cpu = time.process_time()
    t0 = await run_load(base_url, options.graph, tallies, options.concurrency, lag_ms)
    figures = summarize(tallies, t0)
    if not (worker.alive() and gateway.alive()):
        raise LoadErrors("the worker or the gateway died during the load run")
    # CPU seconds of each process during the load: how busy the cores were, and
    # with what (compare with load_wall_s x cores).
    cpu = {name: round(cpu_seconds(pid) - cpu_before[name], 1) for name, pid in pids.items()}
    cpu["bench-client"] = round(time.process_time() - client_cpu, 1)
    figures["cpu_s"] = cpu
    figures["client_loop_lag_p99_ms"] = round(pct(lag_ms, 0.99), 1)
    figures["client_loop_lag_max_ms"] = round(max(lag_ms, default=0.0), 1)
    figures["gateway_peak_rss_mib"] = peak_rss_mib(gateway.pid)
    figures["worker_peak_rss_mib"] = peak_rss_mib(worker.pid)
    figures.update(floors)
    figures["delivery_p50_ratio"] = round(
        figures["delivery_p50_ms"] / floors["redis_pubsub_p50_ms"], 1
    )
    figures["delivery_p99_ratio"] = round(
        figures["delivery_p99_ms"] / floors["redis_pubsub_p99_ms"], 1
    )
    return figures


async def bench_load(
    stack: BenchStack, client: Client, redis_url: str, options: LoadOptions
) -> dict[str, Any]:
    """The load section, bounded by ``options.budget_s``.

    Raises:
        LoadBudgetExceeded: past the deadline (with how many runs had finished).
    """
    head = {
        "graph": options.graph,
        "runs": options.runs,
        "concurrency": options.concurrency,
    }
    started = time.perf_counter()
    tallies = [RunTally() for _ in range(options.runs)]
    try:
        async with asyncio.timeout(options.budget_s):
            figures = await _section(stack, client, redis_url, options, tallies)
    except TimeoutError:
        done = sum(1 for t in tallies if t.status or t.error)
        seen = sum(t.messages for t in tallies)
        raise LoadBudgetExceeded(
            f"load run exceeded its {options.budget_s:.0f} s budget: {done}/{options.runs} "
            f"runs had finished, {seen} messages received"
        ) from None
    return {**head, **figures, "section_wall_s": round(time.perf_counter() - started, 1)}
