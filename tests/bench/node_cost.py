"""What a graph node costs besides its latency, and what a whole graph costs in
throughput, each against bare Temporal activities on the same server:

- the worker's archive path as a deployed worker runs it (``archiving``): the
  archive outbox attached and its archiver draining it in batches;
- MongoDB documents and write commands per node (``MongoWrites``), counted by a
  pymongo command listener on the benchmark's own archive client;
- ``bench_throughput`` (the ``throughput`` section): runs per second of the
  ``pipeline`` example graph, many in flight, against a bare chain of as many
  activities per workflow as one pipeline run executes (read from its history),
  with the CPU seconds this process (worker and client) spent on each.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pymongo import monitoring
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from tests.bench.floor import BareActivities, NoopBatch, bench_noop

WRITE_COMMANDS = frozenset({"insert", "update", "delete"})
# The statements of each write command, by its document-sequence name.
_STATEMENTS = {"insert": "documents", "update": "updates", "delete": "deletes"}
LOCAL_ACTIVITY_MARKER = "core_local_activity"
"""The marker name Temporal's core SDK records a local activity's result under."""
ARCHIVE_COLLECTIONS = (
    "runs",
    "messages",
    "message_pages",
    "node_reports",
    "node_report_pages",
    "run_trace",
)


class MongoWrites(monitoring.CommandListener):
    """Counts write commands and the documents (statements) they carry.

    Registered once per process (pymongo applies it to clients made after).
    """

    def __init__(self) -> None:
        self.commands = 0
        self.statements = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        if name in WRITE_COMMANDS:
            self.commands += 1
            self.statements += len(event.command.get(_STATEMENTS[name]) or [1])

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def snapshot(self) -> tuple[int, int]:
        return self.commands, self.statements


_LISTENER: MongoWrites | None = None


def mongo_writes() -> MongoWrites:
    """The process's write counter (registered on first use: create the archive after)."""
    global _LISTENER
    if _LISTENER is None:
        _LISTENER = MongoWrites()
        monitoring.register(_LISTENER)
    return _LISTENER


async def archived_documents(archive: RunArchive) -> int:
    """Documents in the collections a run writes."""
    counts = [await archive.database[name].count_documents({}) for name in ARCHIVE_COLLECTIONS]
    return sum(counts)


@asynccontextmanager
async def archiving(
    bus: MessageBus, archive: RunArchive, settings: Settings
) -> AsyncIterator[None]:
    """The archive outbox attached and its archiver running, as ``run_worker`` does."""
    from spindle.worker.archive.catch_up import archiver_running

    async with archiver_running(archive, bus.redis, settings.mongo_db):
        yield


async def _activities_per_run(client: Client, workflow_id: str) -> int:
    """Activities (remote and local) one finished workflow executed."""
    scheduled = 0
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled += 1
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            # A local activity's result marker (not a patch's marker).
            attrs = event.marker_recorded_event_attributes
            scheduled += attrs.marker_name == LOCAL_ACTIVITY_MARKER
    return scheduled


async def _many(starts: list[Any], concurrency: int) -> tuple[float, float]:
    """Run coroutine factories ``concurrency`` at a time: (wall s, CPU s of this process)."""
    gate = asyncio.Semaphore(concurrency)

    async def one(start: Any) -> None:
        async with gate:
            await start()

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(start) for start in starts))
    return time.perf_counter() - wall, time.process_time() - cpu


async def bench_throughput(
    client: Client, settings: Settings, *, runs: int, concurrency: int, passes: int = 3
) -> dict[str, Any]:
    """Runs/s of the ``pipeline`` graph vs a bare chain of as many activities
    (medians of ``passes`` alternating passes of ``runs`` runs each)."""
    from spindle.worker.examples import load_example
    from spindle.worker.main import build_worker

    graph = load_example("pipeline")
    text = "The deploy failed again and users are angry"
    queue = f"bench-throughput-{uuid.uuid4().hex[:6]}"

    async def pipeline_run() -> None:
        result = await client.execute_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=graph, input={"text": text}),
            id=f"tp-{uuid.uuid4()}",
            task_queue=queue,
            result_type=GraphRunResult,
        )
        if result.status != "completed":
            raise RuntimeError(f"pipeline run ended {result.status}")

    bare_queue = f"bench-bare-{uuid.uuid4().hex[:6]}"

    async def bare_run() -> None:
        await client.execute_workflow(
            BareActivities.run,
            NoopBatch(count=activities),
            id=f"tb-{uuid.uuid4()}",
            task_queue=bare_queue,
        )

    writes = mongo_writes()
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue=queue)
    bare_worker = Worker(
        client, task_queue=bare_queue, workflows=[BareActivities], activities=[bench_noop]
    )
    graph_passes: list[tuple[float, float]] = []
    bare_passes: list[tuple[float, float]] = []
    docs = commands = 0
    async with archiving(bus, archive, settings), worker, bare_worker:
        probe = f"tp-probe-{uuid.uuid4()}"
        probed = await client.execute_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=graph, input={"text": text}),
            id=probe,
            task_queue=queue,
            result_type=GraphRunResult,
        )
        activities = await _activities_per_run(client, probe)
        nodes = sum(1 for report in probed.node_reports if report.status != NodeStatus.SKIPPED)
        await bare_run()
        # Alternating passes: a machine whose load moves treats both sides alike.
        for _ in range(passes):
            docs_before, (commands_before, _) = await archived_documents(archive), writes.snapshot()
            graph_passes.append(await _many([pipeline_run] * runs, concurrency))
            docs += await archived_documents(archive) - docs_before
            commands += writes.snapshot()[0] - commands_before
            bare_passes.append(await _many([bare_run] * runs, concurrency))
    await bus.close()
    await archive.close()
    graph_rps = statistics.median(runs / wall for wall, _ in graph_passes)
    bare_rps = statistics.median(runs / wall for wall, _ in bare_passes)
    graph_cpu = statistics.median(cpu for _, cpu in graph_passes) / runs
    bare_cpu = statistics.median(cpu for _, cpu in bare_passes) / runs
    total = runs * passes
    return {
        "runs_per_pass": runs,
        "passes": passes,
        "concurrency": concurrency,
        "nodes_per_run": nodes,
        "activities_per_run": activities,
        "pipeline_runs_per_s": round(graph_rps, 2),
        "bare_chain_runs_per_s": round(bare_rps, 2),
        "throughput_ratio": round(graph_rps / bare_rps, 2),
        "pipeline_cpu_ms_per_run": round(graph_cpu * 1000, 2),
        "bare_chain_cpu_ms_per_run": round(bare_cpu * 1000, 2),
        "mongo_documents_per_run": round(docs / total, 2),
        "mongo_documents_per_node": round(docs / total / nodes, 2),
        "mongo_write_commands_per_run": round(commands / total, 2),
        "mongo_write_commands_per_node": round(commands / total / nodes, 2),
    }
