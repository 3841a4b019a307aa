"""The replay section: a recorded fork of a chain of tool nodes against its live run.

The chain (``nodes`` tool nodes, each a no-op tool) runs live on the real worker with
the archive path of a deployed worker (outbox, batching archiver); then a fork of
it with ``tools`` and ``llm`` recorded (built as ``POST /runs/{id}/fork`` builds
it) runs the same graph with every tool call answered from the source's records
(docs/replay-and-compare.md#recorded-replay). Figures, medians of ``repeat`` pairs
after one warm-up pair: the live run's and the fork's wall time per node, their
ratio, and the tool executions of the forks (0 expected); and the same chain on a
worker that records nothing (``call_records_max_per_run`` 0): what recording costs
a live run (``recording_ratio``).

The tool here costs nothing, so the ratio is what answering from a record costs
against calling a free tool (one Redis claim and one MongoDB read per call); a
real tool (an HTTP API, seconds of work) only widens the gap in the fork's favour.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import ToolError
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.forks import build_fork_input
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from spindle.worker.tools.registry import get_tool, tool
from tests.bench.node_cost import archiving

TOOL = "bench_replay_echo"
TASK_QUEUE = "bench-replay"
CALLS: list[int] = []


def _register() -> None:
    try:
        get_tool(TOOL)
    except ToolError:

        @tool(name=TOOL)
        def bench_replay_echo(value: int = 0) -> int:
            """Return the value (a no-op tool; each call is counted)."""
            CALLS.append(value)
            return value


def replay_chain(nodes: int) -> dict[str, Any]:
    return {
        "name": "bench-replay-chain",
        "entry": "n1",
        "nodes": [
            {"id": f"n{i}", "type": "tool", "params": {"tool": TOOL, "args": {"value": i}}}
            for i in range(1, nodes + 1)
        ],
        "edges": [{"from": f"n{i}", "to": f"n{i + 1}"} for i in range(1, nodes)],
    }


async def _timed(
    client: Client, run_input: GraphRunInput, workflow_id: str, task_queue: str = TASK_QUEUE
) -> float:
    start = time.perf_counter()
    result = await client.execute_workflow(
        GRAPH_RUN_WORKFLOW,
        run_input,
        id=workflow_id,
        task_queue=task_queue,
        result_type=GraphRunResult,
    )
    if result.status != "completed":
        raise RuntimeError(f"replay bench run ended {result.status}: {result.error}")
    return time.perf_counter() - start


async def bench_replay(
    client: Client, settings: Settings, *, nodes: int, repeat: int
) -> dict[str, Any]:
    """Live chain vs its recorded fork, per node (see the module docstring)."""
    _register()
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    source = GraphRunInput(graph=parse_graph(replay_chain(nodes)), input={})
    live: list[float] = []
    unrecorded: list[float] = []
    forked: list[float] = []
    fork_calls = 0
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue=TASK_QUEUE)
    # The same chain on a worker that records nothing: what recording costs a live run.
    off = settings.model_copy(update={"call_records_max_per_run": 0})
    plain = build_worker(client, off, bus=bus, archive=archive, task_queue=f"{TASK_QUEUE}-off")
    try:
        async with archiving(bus, archive, settings), worker, plain:
            for i in range(repeat + 1):
                plain_id = f"bench-replay-off-{uuid.uuid4().hex[:10]}"
                plain_s = await _timed(client, source, plain_id, f"{TASK_QUEUE}-off")
                source_id = f"bench-replay-{uuid.uuid4().hex[:10]}"
                live_s = await _timed(client, source, source_id)
                fork = build_fork_input(
                    source,
                    {},
                    ForkRequest(tools="recorded", llm="recorded"),
                    source_workflow_id=source_id,
                    candidate=None,
                    tenant_id=source.tenant_id,
                    user_id=None,
                )
                before = len(CALLS)
                fork_s = await _timed(client, fork, f"{source_id}-fork")
                if i:  # the first pair warms caches and the sandbox
                    live.append(live_s * 1000 / nodes)
                    unrecorded.append(plain_s * 1000 / nodes)
                    forked.append(fork_s * 1000 / nodes)
                    fork_calls += len(CALLS) - before
    finally:
        await bus.close()
        await archive.close()
    live_ms, fork_ms = statistics.median(live), statistics.median(forked)
    plain_ms = statistics.median(unrecorded)
    return {
        "nodes_per_run": nodes,
        "unrecorded_node_ms": round(plain_ms, 2),
        "live_node_ms": round(live_ms, 2),
        "recording_ratio": round(live_ms / plain_ms, 2),
        "recorded_fork_node_ms": round(fork_ms, 2),
        "fork_vs_live_ratio": round(fork_ms / live_ms, 2),
        "fork_tool_executions": fork_calls,
    }
