"""A loop of 10,000 node executions completes with constant history per node.

The run of the issue that Temporal stopped after 1,944 nodes (docs/design.md §10):
two ``tool`` nodes in a loop with ``max_iterations: 4999`` on the back edge. On
the dev server it must complete, continuing as new when Temporal suggests it,
and the history bytes of a node (its activity's input and result) must not grow
with the run: the last 100 nodes within 10 % of the first 100.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.worker.main import build_worker
from tests.history_volume import history_volume, loop_graph

# At the size users run: ~27 nodes/s on a loaded 2-core box (6 min), ~70/s idle;
# 640 s at load average 13-17 (2026-11-25). Profiled then (a sampler over every
# thread of the worker): the worker's Python is under 2 % of the wall time; a node
# costs ~41 ms of workflow task, ~26 ms of activity (its two stream posts) and
# ~13 ms of dispatch on the dev server, i.e. server round trips, not worker code.
# The worker already runs without the archive: no per-node MongoDB round trip.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ITERATIONS = 4999  # 2 * (1 + 4999) = 10,000 node executions


@pytest.fixture(scope="module")
async def long_worker(temporal_client: Client, settings: Settings) -> AsyncIterator[str]:
    """The real worker without the archive (not what is measured here)."""
    bus = MessageBus.from_settings(settings)
    task_queue = f"long-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=None, task_queue=task_queue
        ):
            yield task_queue
    finally:
        await bus.close()


async def test_ten_thousand_nodes_complete_with_flat_history_per_node(
    temporal_client: Client, long_worker: str
) -> None:
    workflow_id = f"long-loop-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=loop_graph(ITERATIONS), input={"text": "one two three"}),
        id=workflow_id,
        task_queue=long_worker,
        result_type=GraphRunResult,
    )
    result = await handle.result()
    elapsed = time.monotonic() - started

    assert result.status is RunStatus.COMPLETED
    assert result.report_counts == {"SUCCESS": 10_000}
    assert result.output == {"words": 3, "characters": 13, "sentences": 1}
    assert result.generation > 1  # Temporal suggested continuing as new

    volume = await history_volume(temporal_client, workflow_id, handle.first_execution_run_id or "")
    assert volume.generations == result.generation
    assert len(volume.node_bytes) == 10_000
    first, last = volume.mean_bytes(0, 100), volume.mean_bytes(-100, None)
    print(
        f"\n10,000 nodes in {elapsed:.1f}s, {volume.generations} generations, "
        f"max {max(volume.events)} events per generation; "
        f"bytes per node: first 100 {first:.0f}, last 100 {last:.0f}"
    )
    assert abs(last - first) <= 0.10 * first
