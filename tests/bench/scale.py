"""The scale section: the same load with one worker process, then with two.

Two task queues, each with a gateway process of its own: one worker process
polls the first, two poll the second. N runs of an example graph (offline LLM)
start at once over HTTP with one SSE client each, exactly as in the load section
(``tests.bench.load.run_load``), and are followed to their COMPLETE; passes
alternate between the queues (1, 2, 1, 2, …) so that a neighbour's load on this
shared machine falls on both alike, and medians are reported. Workers, gateways
and servers share this machine's cores, so what is reported is the ratio between
the two and the CPU seconds each process used (``/proc/<pid>/stat``), not a
promise of linear scaling.

It also reports what one run leaves behind: Redis memory (``MEMORY USAGE`` of
every key of a run's stream, averaged over the runs, and the server's
``used_memory`` growth over a pass divided by its runs) and MongoDB documents
(each collection's document count growth over a pass, per run).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.asyncio import Redis
from temporalio.client import Client

from spindle.dev.processes import ManagedProcess
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.platform.settings import Settings
from tests.bench.load import (
    LoadErrors,
    RunTally,
    _register,
    cpu_seconds,
    peak_rss_mib,
    run_load,
    summarize,
)
from tests.bench.stack import BenchStack
from tests.polling import eventually

SERVERS = {
    "temporal dev server": "temporal",
    "redis-server": "redis",
    "mongo wire server (nx-27017)": "mongo",
}
WARM_UP_RUNS = 4


class ScaleBudgetExceeded(RuntimeError):
    """The scale section did not finish within its deadline."""


@dataclass(frozen=True)
class ScaleOptions:
    """Flags of the scale section."""

    runs: int = 100
    repeat: int = 3
    graph: str = "pipeline"
    budget_s: float = 300.0


@dataclass
class Deployment:
    """A gateway and its workers on a task queue of their own."""

    workers: list[ManagedProcess]
    gateway: ManagedProcess
    base_url: str


async def bench_scale(
    stack: BenchStack, client: Client, settings: Settings, options: ScaleOptions
) -> dict[str, Any]:
    """Alternating passes and the per-run costs, bounded by ``options.budget_s``.

    Raises:
        ScaleBudgetExceeded: past the deadline.
        LoadErrors: a run failed, a stream lost or repeated a message, or a
            process died.
    """
    started = time.perf_counter()
    try:
        async with asyncio.timeout(options.budget_s):
            figures = await _section(stack, client, settings, options)
    except TimeoutError:
        raise ScaleBudgetExceeded(
            f"scale section exceeded its {options.budget_s:.0f} s budget"
        ) from None
    return {
        "graph": options.graph,
        "runs_per_pass": options.runs,
        "passes_each": options.repeat,
        **figures,
        "section_wall_s": round(time.perf_counter() - started, 1),
    }


async def _deploy(stack: BenchStack, client: Client, workers: int, graph: str) -> Deployment:
    queue = f"bench-scale-{workers}"
    gateway, base_url = stack.gateway(f"scale-gateway-{workers}w", task_queue=queue)
    procs = [
        await stack.worker(f"scale-worker-{workers}w-{n}", client, task_queue=queue)
        for n in range(1, workers + 1)
    ]
    await _register(base_url, graph)
    # Warm up: sandbox imports and connections of every worker, not timed.
    warm = [RunTally() for _ in range(WARM_UP_RUNS * workers)]
    await run_load(base_url, graph, warm, len(warm))
    _check(warm, "warm-up")
    return Deployment(procs, gateway, base_url)


async def _section(
    stack: BenchStack, client: Client, settings: Settings, options: ScaleOptions
) -> dict[str, Any]:
    deployments = {n: await _deploy(stack, client, n, options.graph) for n in (1, 2)}
    counter = CostCounter(settings)
    passes: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    try:
        for _ in range(options.repeat):
            for n, deployment in deployments.items():
                passes[n].append(await _pass(stack, deployment, options, counter))
        per_run = await counter.per_run_stream_bytes(options.graph)
    finally:
        await counter.close()
    one, two = (_median_pass(passes[n]) for n in (1, 2))
    every = passes[1] + passes[2]
    return {
        "one_worker": one,
        "two_workers": two,
        "runs_per_s_ratio": round(two["runs_per_s"] / one["runs_per_s"], 2),
        "messages_per_s_ratio": round(two["messages_per_s"] / one["messages_per_s"], 2),
        "runs_per_s_each_pass": {n: [p["runs_per_s"] for p in passes[n]] for n in (1, 2)},
        "redis_bytes_per_run_keys": per_run["bytes"],
        "redis_keys_per_run": per_run["keys"],
        "redis_used_memory_per_run": statistics.median(
            p["redis_used_memory_per_run"] for p in every
        ),
        "mongo_documents_per_run": every[-1]["mongo_documents_per_run"],
        "peak_rss_mib": {
            f"{name}-{n}w": peak_rss_mib(proc.pid)
            for n, d in deployments.items()
            for name, proc in _processes(stack, d).items()
            if proc.pid is not None and name.startswith(("worker", "gateway"))
        },
    }


def _median_pass(passes: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of each figure over the passes of one deployment."""
    cpu_names = passes[0]["cpu_s"]
    return {
        "runs_per_s": statistics.median(p["runs_per_s"] for p in passes),
        "messages_per_s": statistics.median(p["messages_per_s"] for p in passes),
        "run_p50_ms": statistics.median(p["run_p50_ms"] for p in passes),
        "delivery_p50_ms": statistics.median(p["delivery_p50_ms"] for p in passes),
        "delivery_p99_ms": statistics.median(p["delivery_p99_ms"] for p in passes),
        "load_wall_s": statistics.median(p["load_wall_s"] for p in passes),
        "cpu_s": {n: statistics.median(p["cpu_s"][n] for p in passes) for n in cpu_names},
        "cores_busy": statistics.median(p["cores_busy"] for p in passes),
        "cpu_ms_per_run": {
            n: statistics.median(p["cpu_ms_per_run"][n] for p in passes)
            for n in passes[0]["cpu_ms_per_run"]
        },
        "errors": sum(p["errors"] for p in passes),
    }


def _processes(stack: BenchStack, deployment: Deployment) -> dict[str, ManagedProcess]:
    return {
        **{SERVERS[p.name]: p for p in stack.processes if p.name in SERVERS},
        "gateway": deployment.gateway,
        **{f"worker-{i}": w for i, w in enumerate(deployment.workers, start=1)},
    }


async def _pass(
    stack: BenchStack, deployment: Deployment, options: ScaleOptions, counter: CostCounter
) -> dict[str, Any]:
    """N runs at once through one deployment; the figures of the pass."""
    processes = _processes(stack, deployment)
    cpu_before = {name: _cpu(proc) for name, proc in processes.items()}
    machine_before = machine_cpu_seconds()
    memory_before, documents_before = await counter.used_memory(), await counter.documents()
    client_cpu = time.process_time()
    tallies = [RunTally() for _ in range(options.runs)]
    t0 = await run_load(deployment.base_url, options.graph, tallies, options.runs)
    figures = summarize(tallies, t0)
    _check(tallies, f"{len(deployment.workers)}-worker pass")
    if not all(proc.alive() for proc in processes.values()):
        raise LoadErrors("a process died during the scale run")
    cpu = {name: round(_cpu(proc) - cpu_before[name], 2) for name, proc in processes.items()}
    # The clients (HTTP, SSE parsing) run on the same cores as everything else.
    cpu["bench-client"] = round(time.process_time() - client_cpu, 2)
    # What else ran on the machine meanwhile: the cores are shared with it.
    cpu["other-processes"] = round(
        max(0.0, machine_cpu_seconds() - machine_before - sum(cpu.values())), 2
    )
    # The archive is written inside the activities; wait until every run's
    # document is there before counting.
    documents: dict[str, int] = await eventually(
        lambda: counter.documents_after(documents_before, "runs", options.runs),
        what="every run archived",
        timeout=30,
    )
    memory = await counter.used_memory()
    workers_cpu = sum(v for k, v in cpu.items() if k.startswith("worker"))
    return {
        "runs_per_s": round(options.runs / figures["load_wall_s"], 1),
        "messages_per_s": figures["messages_per_s"],
        "run_p50_ms": figures["run_p50_ms"],
        "delivery_p50_ms": figures["delivery_p50_ms"],
        "delivery_p99_ms": figures["delivery_p99_ms"],
        "errors": figures["errors"],
        "load_wall_s": figures["load_wall_s"],
        "cpu_s": cpu,
        "cores_busy": round(sum(cpu.values()) / figures["load_wall_s"], 2),
        "cpu_ms_per_run": {
            "workers": round(workers_cpu * 1000 / options.runs, 1),
            "gateway": round(cpu["gateway"] * 1000 / options.runs, 1),
            "temporal": round(cpu["temporal"] * 1000 / options.runs, 1),
            "spindle_and_servers": round(
                (sum(cpu.values()) - cpu["bench-client"] - cpu["other-processes"])
                * 1000
                / options.runs,
                1,
            ),
        },
        "redis_used_memory_per_run": round((memory - memory_before) / options.runs),
        "mongo_documents_per_run": {
            name: round((count - documents_before.get(name, 0)) / options.runs, 2)
            for name, count in sorted(documents.items())
            if count != documents_before.get(name, 0)
        },
    }


def _check(tallies: list[RunTally], what: str) -> None:
    figures = summarize(tallies, min(t.post_sent for t in tallies))
    if figures["errors"]:
        raise LoadErrors(f"{what}: {figures['error_kinds']}; first: {figures['first_error']}")


def machine_cpu_seconds() -> float:
    """CPU seconds every core of this machine has spent busy since boot (``/proc/stat``)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _cpu(proc: ManagedProcess) -> float:
    assert proc.pid is not None
    return cpu_seconds(proc.pid)


class CostCounter:
    """Reads what runs cost in Redis and MongoDB."""

    def __init__(self, settings: Settings) -> None:
        self._redis = Redis.from_url(settings.redis_url)
        self._mongo = mongo_client(settings, appname="spindle-bench")
        self._db = self._mongo[settings.mongo_db]

    async def used_memory(self) -> int:
        info = await self._redis.info("memory")
        return int(info["used_memory"])

    async def documents(self) -> dict[str, int]:
        """Documents in each collection of the database."""
        names = await self._db.list_collection_names()
        return {name: await self._db[name].count_documents({}) for name in names}

    async def documents_after(
        self, before: dict[str, int], collection: str, added: int
    ) -> dict[str, int]:
        """``documents()`` once ``collection`` holds ``added`` more than ``before``,
        else an empty dict (not yet)."""
        now = await self.documents()
        return now if now.get(collection, 0) - before.get(collection, 0) >= added else {}

    async def per_run_stream_bytes(self, graph: str) -> dict[str, float]:
        """``MEMORY USAGE`` summed over the keys of each run of ``graph`` (the graph
        named in its stream's meta), and its key count: averages over those runs."""
        streams: dict[bytes, list[bytes]] = {}
        async for key in self._redis.scan_iter(match="spindle:{*}:*", count=1000):
            streams.setdefault(key.rsplit(b":", 1)[0], []).append(key)
        runs = [
            keys
            for prefix, keys in streams.items()
            if await self._redis.hget(prefix + b":meta", "graph") == graph.encode()
        ]
        if not runs:
            return {"bytes": 0, "keys": 0}
        total = 0
        for keys in runs:
            for key in keys:
                total += int(await self._redis.memory_usage(key) or 0)
        return {
            "runs": len(runs),
            "bytes": round(total / len(runs)),
            "keys": round(sum(len(keys) for keys in runs) / len(runs), 1),
        }

    async def close(self) -> None:
        await self._redis.aclose()
        await self._mongo.close()
