"""History bytes per node of a long loop: at node 100 and at node 5,000.

The two-``tool``-node loop of docs/design.md §10 runs 5,000 node executions on the
benchmark's dev server; the section reads the run's Temporal histories (every
generation of its continue-as-new chain) and reports what one node's activity
input and result cost, early and late in the run, and their ratio (1.0 = flat).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.platform.settings import Settings
from spindle.worker.main import build_worker
from tests.history_volume import history_volume, loop_graph

WINDOW = 10  # nodes averaged around each point


async def bench_history(client: Client, settings: Settings, nodes: int = 5000) -> dict[str, Any]:
    """Run the loop to ``nodes`` executions; bytes per node at node 100 and at the last."""
    bus = MessageBus.from_settings(settings)
    task_queue = f"bench-history-{uuid.uuid4().hex[:6]}"
    workflow_id = f"bench-history-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    try:
        async with build_worker(client, settings, bus=bus, archive=None, task_queue=task_queue):
            handle = await client.start_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=loop_graph(nodes // 2 - 1), input={"text": "one two three"}),
                id=workflow_id,
                task_queue=task_queue,
                result_type=GraphRunResult,
            )
            result = await handle.result()
    finally:
        await bus.close()
    elapsed = time.perf_counter() - started
    volume = await history_volume(client, workflow_id, handle.first_execution_run_id or "")
    early = volume.mean_bytes(100 - WINDOW, 100)
    late = volume.mean_bytes(len(volume.node_bytes) - WINDOW, None)
    return {
        "nodes": len(volume.node_bytes),
        "status": str(result.status),
        "generations": volume.generations,
        "max_events_per_generation": max(volume.events),
        "bytes_per_node_at_100": round(early),
        f"bytes_per_node_at_{len(volume.node_bytes)}": round(late),
        "late_to_early_ratio": round(late / early, 3),
        "nodes_per_s": round(len(volume.node_bytes) / elapsed, 1),
    }
