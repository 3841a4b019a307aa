"""Spindle's stream vs ``temporalio.contrib.workflow_streams``, on the same dev server.

``workflow_streams`` (shipped with temporalio 1.35) is what a Temporal user would
pick instead: a workflow keeps the log, publishers send it Signals (or append to
it in the workflow), subscribers long-poll it with Updates. Each case here runs
one host workflow on this stack's tuned dev server and an in-process worker:

- publisher: the workflow itself (``WorkflowStream.topic().publish`` after a
  timer), or an activity (``WorkflowStreamClient.from_within_activity``);
- settings: the defaults (2 s publisher batches, 100 ms subscriber poll
  cooldown) or the fastest (a flush forced at each publish, no cooldown);
- 1, 10 and 100 subscribers (``WorkflowStreamClient.subscribe``).

Each event carries the wall-clock time it was published; a receipt's latency
is the subscriber's clock minus that (one machine, one clock). A warm-up event
proves every subscriber is polling before the timed events start. A case ends
when every subscriber has every event or at its bound; what did not arrive is
reported as the fraction delivered, never waited for. The goal's p99 is over every
receipt owed: an event that never reached a subscriber within the bound is later
than any that did (with more than 1 % missing, the p99 is beyond the bound, and
the ratio printed is a lower bound). The p99 of the receipts that did arrive is
printed beside it, with its own worst ratio.

Spindle's figure at each subscriber count is post → receipt through one gateway
process to that many SSE viewers (``tests.bench.fanout``'s raw viewers), the
post being what an activity does (``MessageBus.post``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
import uuid
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamClient
from temporalio.worker import Worker

from spindle.shared.platform.settings import Settings
from tests.bench.fanout import bench_fanout

QUEUE = "bench-wfstreams"
TOPIC = "events"
SUBSCRIBERS = (1, 10, 100)
EVENTS = 20
SPINDLE_MESSAGES = 1000  # a p99 of Spindle that is not its slowest few messages
INTERVAL_S = 0.1  # between two timed events
BOUND_S = 15.0  # after the last event was published
READY_BOUND_S = 10.0  # for every subscriber to get the warm-up event
FASTEST_COOLDOWN = timedelta(0)
DEFAULT_COOLDOWN = timedelta(milliseconds=100)


class HostPlan(BaseModel):
    publisher: str  # "workflow" or "activity"
    fastest: bool
    events: int
    interval_s: float


@activity.defn(name="bench_wfstreams_publish")
async def publish_events(plan: HostPlan) -> int:
    """Publish ``plan.events`` timed events to the parent workflow's stream."""
    if plan.fastest:
        # batch_interval is also the flusher's wake-up; force_flush wakes it at once.
        stream = WorkflowStreamClient.from_within_activity(
            batch_interval=timedelta(milliseconds=1), max_batch_size=1
        )
    else:
        stream = WorkflowStreamClient.from_within_activity()
    async with stream:
        topic = stream.topic(TOPIC)
        for i in range(plan.events):
            await asyncio.sleep(plan.interval_s)  # the publisher's pace
            topic.publish({"i": i, "t": time.time()}, force_flush=plan.fastest)
    return plan.events


@workflow.defn(name="BenchWorkflowStreamHost", sandboxed=False)
class StreamHost:
    """Hosts the stream; publishes (or runs the publishing activity) after ``go``."""

    @workflow.init
    def __init__(self, plan: HostPlan) -> None:
        self.stream = WorkflowStream()
        self.started = False
        self.finished = False

    @workflow.signal
    def go(self) -> None:
        self.started = True

    @workflow.signal
    def finish(self) -> None:
        self.finished = True

    @workflow.run
    async def run(self, plan: HostPlan) -> int:
        topic = self.stream.topic(TOPIC)
        topic.publish({"i": -1, "t": time.time()})  # the warm-up: subscribers are polling
        await workflow.wait_condition(lambda: self.started)
        if plan.publisher == "workflow":
            for i in range(plan.events):
                await workflow.sleep(timedelta(seconds=plan.interval_s))
                # Wall clock on purpose (unsandboxed bench workflow): the receipt is timed
                # against the moment the workflow code published.
                topic.publish({"i": i, "t": time.time()})
        else:
            await workflow.execute_activity(
                publish_events, plan, start_to_close_timeout=timedelta(minutes=5)
            )
        await workflow.wait_condition(lambda: self.finished)
        return plan.events


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 2)


async def _subscriber(
    client: Client,
    workflow_id: str,
    cooldown: timedelta,
    events: int,
    ready: asyncio.Event,
    latencies: list[float],
) -> None:
    stream = WorkflowStreamClient.create(client, workflow_id)
    async for item in stream.subscribe(TOPIC, poll_cooldown=cooldown):
        if item.data["i"] < 0:
            ready.set()
            continue
        latencies.append((time.time() - item.data["t"]) * 1000)
        if item.data["i"] >= events - 1:
            return


async def _case(client: Client, publisher: str, fastest: bool, subscribers: int) -> dict[str, Any]:
    plan = HostPlan(publisher=publisher, fastest=fastest, events=EVENTS, interval_s=INTERVAL_S)
    workflow_id = f"bench-wfs-{uuid.uuid4().hex[:12]}"
    handle = await client.start_workflow(StreamHost.run, plan, id=workflow_id, task_queue=QUEUE)
    cooldown = FASTEST_COOLDOWN if fastest else DEFAULT_COOLDOWN
    readies = [asyncio.Event() for _ in range(subscribers)]
    latencies: list[list[float]] = [[] for _ in range(subscribers)]
    tasks = [
        asyncio.create_task(
            _subscriber(client, workflow_id, cooldown, EVENTS, readies[k], latencies[k])
        )
        for k in range(subscribers)
    ]
    ready = 0
    try:
        with contextlib.suppress(TimeoutError):
            # Past the bound, go anyway: the subscribers not polling yet are
            # what this case reports (their events count as not delivered).
            await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), READY_BOUND_S)
        ready = sum(r.is_set() for r in readies)
        await handle.signal(StreamHost.go)
        await asyncio.wait(tasks, timeout=EVENTS * INTERVAL_S + BOUND_S)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await handle.signal(StreamHost.finish)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(handle.result(), 10)
    received = sum(len(values) for values in latencies)
    flat = [v for values in latencies for v in values]
    # Over every receipt owed (each event at each subscriber): one that never came
    # took longer than the case's bound, so it sorts last.
    owed = flat + [math.inf] * (EVENTS * subscribers - received)
    p99_owed = _pct(owed, 0.99)
    return {
        "publisher": publisher,
        "settings": "fastest" if fastest else "default",
        "subscribers": subscribers,
        "p50_ms": _pct(flat, 0.5),
        "p99_ms": _pct(flat, 0.99),
        "p99_all_owed_ms": p99_owed if p99_owed != math.inf else None,
        "polling_at_start": ready,
        "delivered": round(received / (EVENTS * subscribers), 3),
    }


def _ratios(case: dict[str, Any], ours: float | None) -> None:
    """Set the case's p99 ratios against Spindle's p99 ``ours``.

    ``p99_ratio`` is over every receipt owed: when more than 1 % never arrived,
    their p99 is beyond the bound, and the ratio is the bound over ours, a lower
    bound (``p99_ratio_is_lower_bound``). ``p99_ratio_delivered_only`` compares
    the p99 of the receipts that arrived.
    """
    theirs, owed = case["p99_ms"], case["p99_all_owed_ms"]
    case["p99_ratio_delivered_only"] = round(theirs / ours, 1) if theirs and ours else None
    beyond = owed is None
    case["p99_ratio_is_lower_bound"] = beyond
    if not ours:
        case["p99_ratio"] = None
    else:
        case["p99_ratio"] = round((BOUND_S * 1000 if beyond else owed) / ours, 1)


async def spindle_stream_figures(settings: Settings, base_url: str) -> dict[int, dict[str, Any]]:
    """Spindle's post → SSE receipt at each subscriber count (``bench_fanout``)."""
    return {
        count: await bench_fanout(settings, base_url, viewers=count, messages=SPINDLE_MESSAGES)
        for count in SUBSCRIBERS
    }


async def bench_workflow_streams(
    client: Client, spindle: dict[int, dict[str, Any]]
) -> dict[str, Any]:
    """Each workflow_streams case against ``spindle`` (``spindle_stream_figures``) at
    its subscriber count, and the p99 ratios.

    The two sides are measured apart: Spindle's sub-millisecond figures with the
    other stream sections, before the sections that load the stack; these cases
    last, since their 100-subscriber cases leave the dev server retrying Updates
    refused at its in-flight limit.
    """
    cases: list[dict[str, Any]] = []
    async with Worker(
        client, task_queue=QUEUE, workflows=[StreamHost], activities=[publish_events]
    ):
        for publisher in ("workflow", "activity"):
            for fastest in (False, True):
                for count in SUBSCRIBERS:
                    case = await _case(client, publisher, fastest, count)
                    case["spindle_p50_ms"] = spindle[count]["sse_p50_ms"]
                    case["spindle_p99_ms"] = spindle[count]["sse_p99_ms"]
                    # Spindle's p99 is over the receipts that came: its misses, beside it.
                    case["spindle_missed"] = spindle[count]["sse_missed"]
                    _ratios(case, spindle[count]["sse_p99_ms"])
                    cases.append(case)

    def worst(key: str) -> float | None:
        return min((c[key] for c in cases if c[key] is not None), default=None)

    return {
        "events_per_case": EVENTS,
        "publish_interval_ms": INTERVAL_S * 1000,
        "bound_after_last_event_s": BOUND_S,
        "cases": cases,
        "spindle_vs_workflow_streams_worst_p99_ratio": worst("p99_ratio"),
        "worst_p99_ratio_delivered_only": worst("p99_ratio_delivered_only"),
    }
