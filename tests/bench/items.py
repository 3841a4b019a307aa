"""The items section: what one item of a ``map`` costs against one bare activity.

A graph of one ``map`` node runs a no-op tool (``bench_echo``) over N items
(10,000 by default) through the real worker (``build_worker``: real activities,
Redis bus, Mongo archive) on the bench's Temporal dev server. Reported: the wall
time of the map run, its cost per item, the same against a bare Temporal
activity measured in the same run (``tests.bench.floor``: the cost one node would
pay per item if each item were an activity), how long the plan, one batch (median)
and the collection take (from the history's start and completion times), and the run's history:
events and bytes, which grow per batch, never per item.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import COLLECT_ITEMS, PLAN_ITEMS, RUN_ITEM_BATCH
from tests.bench.floor import BareActivities, NoopBatch, bench_noop

FLOOR_ACTIVITIES = 100
WARM_UP_ITEMS = 200


def map_graph(concurrency: int) -> dict[str, Any]:
    return {
        "name": "bench-map",
        "entry": "echo",
        "nodes": [
            {
                "id": "echo",
                "type": "map",
                "params": {
                    "over": "input.rows",
                    "concurrency": concurrency,
                    "node": {
                        "type": "tool",
                        "params": {"tool": "bench_echo"},
                        "inputs": {"args": "{value: item.n}"},
                    },
                },
            }
        ],
        "edges": [],
    }


def activity_durations_ms(events: Any) -> dict[str, list[float]]:
    """Start → completion of each activity, by activity type, from a run's history."""
    scheduled: dict[int, str] = {}
    started: dict[int, tuple[str, float]] = {}
    out: dict[str, list[float]] = {}
    for event in events:
        millis = event.event_time.ToMicroseconds() / 1000
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attributes = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = attributes.activity_type.name
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            kind = scheduled[event.activity_task_started_event_attributes.scheduled_event_id]
            started[event.event_id] = (kind, millis)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            kind, start = started[event.activity_task_completed_event_attributes.started_event_id]
            out.setdefault(kind, []).append(millis - start)
    return out


async def _bare_activity_ms(client: Client, repeat: int) -> float:
    floor: list[float] = []
    async with Worker(
        client, task_queue="bench-items-floor", workflows=[BareActivities], activities=[bench_noop]
    ):
        for _ in range(repeat):
            start = time.perf_counter()
            await client.execute_workflow(
                BareActivities.run,
                NoopBatch(count=FLOOR_ACTIVITIES),
                id=f"items-floor-{uuid.uuid4()}",
                task_queue="bench-items-floor",
            )
            floor.append((time.perf_counter() - start) * 1000 / FLOOR_ACTIVITIES)
    return statistics.median(floor)


async def bench_items(
    client: Client, settings: Settings, *, items: int, concurrency: int, repeat: int
) -> dict[str, Any]:
    """The section's figures (see the module docstring)."""
    from spindle.shared.graphs.structure import parse_graph
    from spindle.worker.main import build_worker
    from spindle.worker.offerings import load_tools
    from spindle.worker.tools.registry import tool

    if "bench_echo" not in load_tools():

        @tool(name="bench_echo")
        def bench_echo(value: int = 0) -> int:
            """Return the value (a no-op node body)."""
            return value

    floor_ms = await _bare_activity_ms(client, repeat)
    spec = parse_graph(map_graph(concurrency))
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    walls: list[float] = []
    durations: dict[str, list[float]] = {}
    events = size = 0
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue="bench-items")
    async with worker:
        for i in range(repeat + 1):
            count = items if i else WARM_UP_ITEMS  # the first run warms the sandbox
            rows = [{"n": n} for n in range(count)]
            workflow_id = f"bench-map-{uuid.uuid4()}"
            start = time.perf_counter()
            result = await client.execute_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=spec, input={"rows": rows}),
                id=workflow_id,
                task_queue="bench-items",
                result_type=GraphRunResult,
            )
            elapsed = time.perf_counter() - start
            if result.status != "completed" or result.output["succeeded"] != count:
                raise RuntimeError(f"bench map ended {result.status}: {result.error}")
            if i:
                walls.append(elapsed)
                history = await client.get_workflow_handle(workflow_id).fetch_history()
                events = len(history.events)
                size = sum(event.ByteSize() for event in history.events)
                for kind, times in activity_durations_ms(history.events).items():
                    durations.setdefault(kind, []).extend(times)
    await bus.close()
    await archive.close()
    wall = statistics.median(walls)
    per_item_ms = wall * 1000 / items
    return {
        "items": items,
        "batch_size": settings.item_batch_size,
        "concurrency": concurrency,
        "map_wall_s": round(wall, 2),
        "per_item_ms": round(per_item_ms, 4),
        "bare_activity_ms": round(floor_ms, 2),
        "per_item_vs_bare_activity": round(per_item_ms / floor_ms, 4),
        "plan_ms": round(statistics.median(durations[PLAN_ITEMS]), 1),
        "batch_ms_p50": round(statistics.median(durations[RUN_ITEM_BATCH]), 1),
        "collect_ms": round(statistics.median(durations[COLLECT_ITEMS]), 1),
        "history_events": events,
        "history_bytes": size,
    }
