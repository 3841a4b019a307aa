"""Spindle benchmark: one command, one run, ratios against raw floors.

    .venv/bin/python -m tests.bench.run
        [--only nodes|sse|updates|load|workstreams|jsonrpc|telemetry|scale|tokens|browser|redis
                |history|items|budgets|hitl|fanout|wfstreams|throughput|chat|replay|evaluations]
        [--history-nodes 5000]
        [--items 10000]
        [--budget-turns 40] [--hitl-answers 20] [--chat-messages 10000]
        [--items-concurrency 16]
        [--nodes 50] [--messages 300] [--repeat 3] [--load-runs 200] [--load-concurrency N]
        [--ws-launches 20] [--ws-levels 5,10,20,30,40,50,75,100]
        [--ws-slow-levels 100,150,200]

Starts its own tuned Temporal dev server, Redis and Mongo wire server on free
loopback ports, then prints (each section, or those chosen with ``--only``):

- ``nodes``: per-node overhead of a graph run vs a bare Temporal activity (ratio), in
  wall time and in CPU time of this process (worker and client), with the archive
  path of a deployed worker (outbox and batching archiver), and the MongoDB
  documents and write commands per node (see ``tests.bench.node_cost``);
- ``sse``: message post → SSE receipt latency p50/p99 vs a bare Redis publish → subscribe;
- ``updates``: ``/updates`` time plain and gzip and the gzip ratio for 1000 messages
  of a real agent run (see ``tests.bench.updates``);
- ``load``: N concurrent runs over HTTP with one SSE client each, through a
  worker and a gateway process (see ``tests.bench.load``), bounded in time;
- ``workstreams``: launch → first child message on the parent's stream, and how
  many interactive workstreams one worker holds with a message each per second
  and each per 10 s, against the goals (see ``tests.bench.workstreams``),
  bounded in time.
- ``jsonrpc``: ``tasks.create``/``tasks.get`` requests per second against a bare
  gateway round trip, and ``tasks.execute`` of a 20-task tree against one graph
  run of the same 20 nodes (see ``tests.bench.jsonrpc``).
- ``telemetry``: ms per node of the same chain with archive, tracing (OTLP/HTTP
  to a local dummy receiver) and metrics on vs all off, and their ratio (see
  ``tests.bench.telemetry``).
- ``scale``: the load through one worker process and through two (alternating
  passes, medians): runs/s and messages/s of each and their ratio, CPU seconds of
  every process, and what one run costs in Redis memory and MongoDB documents
  (see ``tests.bench.scale``), bounded in time.
- ``tokens``: STREAMING_CHUNK messages and bytes on the wire per 1000 LLM tokens
  with batching (16 ms / 200 characters) vs one message per token, at several
  token paces, and the posting cost per token (see ``tests.bench.tokens``).
- ``browser``: token → browser-visible latency p50/p99: a STREAMING_CHUNK posted
  through the bus until its text is in the conversation page of a headless
  Chromium, vs a bare Redis publish → subscribe (see ``tests.bench.browser_latency``).
- ``history``: history bytes per node (activity input + result, read from the
  Temporal histories of every generation) of a two-node loop at node 100 and at
  node 5,000, and their ratio (see ``tests.bench.history``).
- ``redis``: the bus on one Redis server vs a three-master Redis Cluster: post
  round trip and post → live receipt through the subscription hub, each against
  a bare (S)PUBLISH → (S)SUBSCRIBE (see ``tests.bench.redis_topologies``).
- ``items``: wall time of a ``map`` of a no-op tool over 10,000 items, its cost per
  item against one bare Temporal activity, and the run's history events and bytes
  (see ``tests.bench.items``).
- ``budgets``: budget accounting overhead per LLM turn: ms per turn (with its tool
  call) of an agent with a budget whose caps are never reached vs without one, and
  their ratio (see ``tests.bench.budgets``).
- ``throughput``: runs per second of the ``pipeline`` graph, many in flight, vs a
  bare chain of as many activities per workflow, with CPU and MongoDB writes per
  run (see ``tests.bench.node_cost``).
- ``hitl``: a human's answer → the run resumes (takes it and asks the next prompt),
  and the answer's update round trip, each against a bare Temporal Update round
  trip (ratios; see ``tests.bench.hitl``).
- ``chat``: user message → first STREAMING_CHUNK and → ANSWER vs a bare Temporal
  Update round trip, the time per message of a long chat (first 100 vs last 100),
  history bytes per message at message 100 and at the end, and the cost of a
  summarize step (see ``tests.bench.chat``).
- ``fanout``: 1,000 SSE viewers of one run through one gateway process vs a raw
  Redis relay to 1,000 subscribers, p50/p99 (see ``tests.bench.fanout``).
- ``wfstreams``: ``temporalio.contrib.workflow_streams`` vs Spindle's stream at 1,
  10 and 100 subscribers (see ``tests.bench.workflow_streams``), bounded in time.
- ``replay``: a recorded fork (``tools`` and ``llm`` recorded) of a ``--nodes`` chain of
  tool nodes against its live run, per node and as a ratio, with the fork's tool
  executions (see ``tests.bench.replay``).
- ``evaluations``: an evaluation's runs per second over ``--evaluation-runs`` archived
  runs, recorded tools (see ``tests.bench.evaluations``).

Figures are printed and written to ``test-artifacts/bench.json``; nothing here
asserts a time (speed is reported, never tested), except that the load run must
finish within its budget and with 0 errors, or the command fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.temporal.converter import data_converter
from tests.bench.browser_latency import bench_browser_latency
from tests.bench.budgets import bench_budgets
from tests.bench.chat import bench_chat
from tests.bench.evaluations import bench_evaluations
from tests.bench.fanout import bench_fanout
from tests.bench.floor import (
    BareActivities,
    NoopBatch,
    SandboxedBareActivities,
    bench_noop,
)
from tests.bench.history import bench_history
from tests.bench.hitl import bench_hitl
from tests.bench.items import bench_items
from tests.bench.jsonrpc import bench_jsonrpc
from tests.bench.load import LOAD_INPUTS, LoadBudgetExceeded, LoadErrors, LoadOptions, bench_load
from tests.bench.node_cost import archived_documents, archiving, bench_throughput, mongo_writes
from tests.bench.redis_topologies import bench_redis_topologies
from tests.bench.replay import bench_replay
from tests.bench.scale import ScaleBudgetExceeded, ScaleOptions, bench_scale
from tests.bench.sse import bench_sse
from tests.bench.stack import bench_stack
from tests.bench.telemetry import bench_telemetry
from tests.bench.tokens import bench_tokens
from tests.bench.updates import bench_updates
from tests.bench.workflow_streams import bench_workflow_streams, spindle_stream_figures
from tests.bench.workstreams import (
    WorkstreamBenchOptions,
    WorkstreamBudgetExceeded,
    bench_workstreams,
)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SECTIONS = (
    "nodes",
    "sse",
    "updates",
    "load",
    "workstreams",
    "jsonrpc",
    "telemetry",
    "scale",
    "tokens",
    "browser",
    "redis",
    "history",
    "items",
    "budgets",
    "hitl",
    "fanout",
    "wfstreams",
    "throughput",
    "chat",
    "replay",
    "evaluations",
)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def chain_graph(nodes: int) -> dict[str, Any]:
    return {
        "name": "bench-chain",
        "entry": "n1",
        "nodes": [
            {"id": f"n{i}", "type": "tool", "params": {"tool": "bench_echo", "args": {"value": i}}}
            for i in range(1, nodes + 1)
        ],
        "edges": [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(1, nodes)],
    }


async def bench_nodes(
    client: Client, settings: Settings, nodes: int, repeat: int
) -> dict[str, Any]:
    from spindle.shared.graphs.structure import parse_graph
    from spindle.worker.main import build_worker
    from spindle.worker.tools.registry import tool

    @tool(name="bench_echo")
    def bench_echo(value: int = 0) -> int:
        """Return the value (a no-op node body)."""
        return value

    floor: list[float] = []
    floor_cpu: list[float] = []
    sandboxed: list[float] = []
    workflows = [BareActivities, SandboxedBareActivities]
    async with Worker(
        client, task_queue="bench-floor", workflows=workflows, activities=[bench_noop]
    ):
        for bare in (BareActivities.run, SandboxedBareActivities.run):
            await client.execute_workflow(
                bare, NoopBatch(count=5), id=f"warm-{uuid.uuid4()}", task_queue="bench-floor"
            )
        for _ in range(repeat):
            for bare, wall in (
                (BareActivities.run, floor),
                (SandboxedBareActivities.run, sandboxed),
            ):
                cpu, start = time.process_time(), time.perf_counter()
                await client.execute_workflow(
                    bare,
                    NoopBatch(count=nodes),
                    id=f"floor-{uuid.uuid4()}",
                    task_queue="bench-floor",
                )
                wall.append((time.perf_counter() - start) * 1000 / nodes)
                if wall is floor:
                    floor_cpu.append((time.process_time() - cpu) * 1000 / nodes)

    writes = mongo_writes()
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    spec = parse_graph(chain_graph(nodes))
    spindle: list[float] = []
    spindle_cpu: list[float] = []
    docs = commands = 0
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue="bench-spindle")
    # The archive path of a deployed worker: outbox attached, archiver draining it.
    async with archiving(bus, archive, settings), worker:
        for i in range(repeat + 1):
            docs_before, (commands_before, _) = await archived_documents(archive), writes.snapshot()
            cpu, start = time.process_time(), time.perf_counter()
            result = await client.execute_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=spec, input={}),
                id=f"bench-{uuid.uuid4()}",
                task_queue="bench-spindle",
                result_type=GraphRunResult,
            )
            elapsed = (time.perf_counter() - start) * 1000 / nodes
            cpu_ms = (time.process_time() - cpu) * 1000 / nodes
            if result.status != "completed":
                raise RuntimeError(f"bench graph ended {result.status}: {result.error}")
            if i:  # the first run warms caches and the sandbox
                spindle.append(elapsed)
                spindle_cpu.append(cpu_ms)
                # finish_run waited for the archiver: the run is archived whole.
                docs += await archived_documents(archive) - docs_before
                commands += writes.snapshot()[0] - commands_before
    await bus.close()
    await archive.close()
    node_ms = statistics.median(spindle)
    floor_ms = statistics.median(floor)
    node_cpu, bare_cpu = statistics.median(spindle_cpu), statistics.median(floor_cpu)
    return {
        "nodes_per_run": nodes,
        "bare_activity_ms": round(floor_ms, 2),
        "graph_node_ms": round(node_ms, 2),
        "node_overhead_ratio": round(node_ms / floor_ms, 2),
        # The same bare chain in the workflow sandbox: the part of the ratio that is
        # the sandbox's, which GraphRun keeps on (docs/benchmarks.md).
        "bare_activity_sandboxed_ms": round(statistics.median(sandboxed), 2),
        "node_vs_sandboxed_ratio": round(node_ms / statistics.median(sandboxed), 2),
        "bare_activity_cpu_ms": round(bare_cpu, 3),
        "graph_node_cpu_ms": round(node_cpu, 3),
        "node_cpu_ratio": round(node_cpu / bare_cpu, 2),
        "mongo_documents_per_node": round(docs / (repeat * nodes), 2),
        "mongo_write_commands_per_node": round(commands / (repeat * nodes), 2),
    }


async def _stream_sections(
    client: Client, settings: Settings, base: str, args: argparse.Namespace, chosen: set[str]
) -> tuple[dict[str, Any], dict[int, dict[str, Any]] | None]:
    """The stream sections, and Spindle's side of ``wfstreams`` (None: not chosen).

    Spindle's side of ``wfstreams`` comes before the 1,000-viewer fan-out, whose
    closed connections the gateway's collector walks afterwards.
    """
    results: dict[str, Any] = {}
    if "sse" in chosen:
        results["sse_delivery"] = await bench_sse(settings, base, args.messages)
    if "updates" in chosen:
        results["updates_1000"] = await bench_updates(client, settings, base)
    spindle_streams = None
    if "wfstreams" in chosen:
        spindle_streams = await spindle_stream_figures(settings, base)
    if "fanout" in chosen:
        results["fanout"] = await bench_fanout(
            settings, base, viewers=args.fanout_viewers, messages=args.fanout_messages
        )
    return results, spindle_streams


async def run(args: argparse.Namespace) -> dict[str, Any]:
    chosen = set(args.only or SECTIONS)
    results: dict[str, Any] = {}
    with bench_stack() as stack:
        settings = Settings()
        # The converter production uses (the offload codec checks each payload's size).
        client = await Client.connect(
            stack.temporal_address, data_converter=data_converter(settings)
        )
        base = ""
        if chosen & {"sse", "updates", "browser", "fanout", "wfstreams"}:
            _, base = stack.gateway("gateway")
        if "nodes" in chosen:
            results["graph_nodes"] = await bench_nodes(client, settings, args.nodes, args.repeat)
        # The stream-path latencies (sub-millisecond at one viewer) before the
        # sections that load the stack: what those leave running is not theirs.
        streams, spindle_streams = await _stream_sections(client, settings, base, args, chosen)
        results.update(streams)
        if "load" in chosen:
            options = LoadOptions(
                runs=args.load_runs,
                concurrency=args.load_concurrency or args.load_runs,
                graph=args.load_graph,
                budget_s=args.load_budget,
            )
            results["load"] = await bench_load(stack, client, settings.redis_url, options)
        if "workstreams" in chosen:
            levels = tuple(int(n) for n in args.ws_levels.split(","))
            slow = tuple(int(n) for n in args.ws_slow_levels.split(",") if n)
            ws_options = WorkstreamBenchOptions(
                launches=args.ws_launches, levels=levels, slow_levels=slow
            )
            results["workstreams"] = await bench_workstreams(stack, client, ws_options)
        if "jsonrpc" in chosen:
            results["jsonrpc"] = await bench_jsonrpc(stack, client)
        if "telemetry" in chosen:
            results["telemetry"] = await bench_telemetry(
                client, settings, chain_graph(args.nodes), nodes=args.nodes, repeat=args.repeat
            )
        if "scale" in chosen:
            scale_options = ScaleOptions(
                runs=args.scale_runs,
                repeat=args.scale_repeat,
                graph=args.load_graph,
                budget_s=args.scale_budget,
            )
            results["scale"] = await bench_scale(stack, client, settings, scale_options)
        if "tokens" in chosen:
            pacings = tuple(float(ms) for ms in args.token_pacing_ms.split(","))
            results["tokens"] = await bench_tokens(settings, tokens=args.tokens, pacings_ms=pacings)
        if "browser" in chosen:
            results["browser_latency"] = await bench_browser_latency(
                settings, base, args.browser_tokens
            )
        if "redis" in chosen:
            results["redis_topologies"] = await bench_redis_topologies(args.messages)
        if spindle_streams is not None:
            results["workflow_streams"] = await bench_workflow_streams(client, spindle_streams)
        results.update(await _workflow_sections(client, settings, args, chosen))
    return results


async def _workflow_sections(
    client: Client, settings: Settings, args: argparse.Namespace, chosen: set[str]
) -> dict[str, Any]:
    """The sections that drive workflows on the client directly (no gateway)."""
    results: dict[str, Any] = {}
    if "history" in chosen:
        results["history_per_node"] = await bench_history(
            client, settings, nodes=args.history_nodes
        )
    if "items" in chosen:
        results["items"] = await bench_items(
            client,
            settings,
            items=args.items,
            concurrency=args.items_concurrency,
            repeat=args.repeat,
        )
    if "budgets" in chosen:
        results["budget_accounting"] = await bench_budgets(
            client, settings, turns=args.budget_turns, repeat=args.repeat
        )
    if "hitl" in chosen:
        results["hitl_answer"] = await bench_hitl(client, settings, prompts=args.hitl_answers)
    if "throughput" in chosen:
        results["throughput"] = await bench_throughput(
            client, settings, runs=args.throughput_runs, concurrency=args.throughput_concurrency
        )
    if "chat" in chosen:
        results["chat"] = await bench_chat(client, settings, messages=args.chat_messages)
    if "replay" in chosen:
        results["recorded_replay"] = await bench_replay(
            client, settings, nodes=args.nodes, repeat=args.repeat
        )
    if "evaluations" in chosen:
        results["evaluation_runs_per_second"] = await bench_evaluations(
            client, settings, runs=args.evaluation_runs
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        action="append",
        choices=SECTIONS,
        help="run only this section (repeatable); default: all of them",
    )
    parser.add_argument(
        "--load", action="append_const", const="load", dest="only", help="same as --only load"
    )
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--load-runs", type=int, default=200, help="runs of the load section")
    parser.add_argument("--evaluation-runs", type=int, default=200, help="evaluations section")
    parser.add_argument(
        "--load-concurrency", type=int, default=0, help="runs in flight at once (default: all)"
    )
    parser.add_argument("--load-graph", choices=sorted(LOAD_INPUTS), default="pipeline")
    parser.add_argument(
        "--load-budget", type=float, default=180.0, help="deadline of the load section, s"
    )
    parser.add_argument("--ws-launches", type=int, default=20, help="launches timed")
    parser.add_argument(
        "--browser-tokens", type=int, default=300, help="chunks timed by the browser section"
    )
    parser.add_argument(
        "--ws-levels",
        default="5,10,20,30,40,50,75,100",
        help="concurrent workstreams tried, in order, until one does not hold",
    )
    parser.add_argument(
        "--ws-slow-levels",
        default="100,150,200",
        help="the same at one message per 10 s each (30 s window per level)",
    )
    parser.add_argument(
        "--scale-runs", type=int, default=100, help="runs of each pass of the scale section"
    )
    parser.add_argument(
        "--scale-repeat", type=int, default=3, help="passes of each deployment, alternating"
    )
    parser.add_argument(
        "--scale-budget", type=float, default=300.0, help="deadline of the scale section, s"
    )
    parser.add_argument(
        "--history-nodes", type=int, default=5000, help="node executions of the history section"
    )
    parser.add_argument("--tokens", type=int, default=1000, help="tokens of the tokens section")
    parser.add_argument(
        "--token-pacing-ms",
        default="1,5,20",
        help="pauses before each token (ms, comma-separated) of the tokens section",
    )
    parser.add_argument("--items", type=int, default=10_000, help="items of the items section")
    parser.add_argument(
        "--hitl-answers", type=int, default=20, help="answers timed by the hitl section"
    )
    parser.add_argument("--chat-messages", type=int, default=10_000, help="the long chat's size")
    parser.add_argument(
        "--items-concurrency", type=int, default=16, help="the map's concurrency (items section)"
    )
    parser.add_argument(
        "--budget-turns", type=int, default=40, help="LLM turns per run of the budgets section"
    )
    parser.add_argument("--fanout-viewers", type=int, default=1000, help="SSE viewers (fanout)")
    parser.add_argument("--fanout-messages", type=int, default=50, help="messages (fanout)")
    parser.add_argument(
        "--throughput-runs", type=int, default=60, help="runs of each pass (throughput section)"
    )
    parser.add_argument(
        "--throughput-concurrency", type=int, default=20, help="runs in flight (throughput)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        # The standard loop: the stream sections' clients are the instrument, and
        # on uvloop they read the two sides differently. The in-process workers
        # (nodes, throughput) run on it too; worker processes (load, workstreams)
        # on uvloop, as deployed (docs/operations/scaling.md#worker-event-loop).
        results = asyncio.run(run(args))
    except (LoadBudgetExceeded, LoadErrors, ScaleBudgetExceeded, WorkstreamBudgetExceeded) as exc:
        sys.exit(f"FAILED: {exc}")
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "bench.json").write_text(json.dumps(results, indent=2))
    for section, figures in results.items():
        print(f"\n{section}")
        for key, value in figures.items():
            if isinstance(value, list) and all(isinstance(v, dict) for v in value):
                print(f"  {key}")
                for item in value:
                    print("    " + ", ".join(f"{k}={v}" for k, v in item.items()))
            else:
                print(f"  {key:24} {value}")
    print(f"\ntotal wall time {time.perf_counter() - started:.1f} s")
    sys.stdout.flush()
    load_errors = results.get("load", {}).get("errors", 0)
    if load_errors:
        sys.exit(f"FAILED: the load run saw {load_errors} errors (must be 0)")


if __name__ == "__main__":
    main()
