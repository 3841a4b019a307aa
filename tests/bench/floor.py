"""The raw floors every Spindle figure is compared against, measured in the same
run: a bare Temporal activity and a bare Redis publish → subscribe."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import activity, workflow


class NoopBatch(BaseModel):
    count: int


class NoopDone(BaseModel):
    count: int


@activity.defn(name="bench_noop")
async def bench_noop(batch: NoopBatch) -> NoopDone:
    return NoopDone(count=batch.count)


async def noop_chain(batch: NoopBatch) -> NoopDone:
    """``count`` sequential no-op activities, from inside a workflow."""
    for i in range(batch.count):
        await workflow.execute_activity(
            bench_noop, NoopBatch(count=i), start_to_close_timeout=timedelta(seconds=30)
        )
    return NoopDone(count=batch.count)


@workflow.defn(name="BenchBareActivities", sandboxed=False)
class BareActivities:
    """``count`` sequential no-op activities: the floor cost of one node."""

    @workflow.run
    async def run(self, batch: NoopBatch) -> NoopDone:
        return await noop_chain(batch)


@workflow.defn(name="BenchBareActivitiesSandboxed")
class SandboxedBareActivities:
    """The same chain in the workflow sandbox, as ``GraphRun`` runs: what the
    sandbox alone adds to a node (a second floor, for the record)."""

    @workflow.run
    async def run(self, batch: NoopBatch) -> NoopDone:
        return await noop_chain(batch)


async def next_message(pubsub: Any) -> None:
    """Wait for the next published message on a redis-py ``PubSub`` (skipping replies)."""
    while True:
        msg = await pubsub.get_message(timeout=5)
        if msg is not None and msg["type"] == "message":
            return


class PubSubFloor:
    """A bare PUBLISH → SUBSCRIBE pair, sampled one ~300 B message at a time.

    Open it beside the path it is the floor of and take a sample between that
    path's samples: both then see the same machine (``redis_pubsub_latencies``
    takes them all in a row).
    """

    def __init__(self, redis_url: str) -> None:
        from redis.asyncio import Redis

        self._pub = Redis.from_url(redis_url)
        self._sub = Redis.from_url(redis_url)
        self._pubsub = self._sub.pubsub()
        self._payload = b"x" * 300

    async def open(self) -> None:
        await self._pubsub.subscribe("bench:floor")
        await self._pubsub.get_message(timeout=5)  # the subscribe confirmation

    async def sample(self) -> float:
        """One publish → receive latency, ms."""
        start = time.perf_counter()
        await self._pub.publish("bench:floor", self._payload)
        await next_message(self._pubsub)
        return (time.perf_counter() - start) * 1000

    async def close(self) -> None:
        await self._pubsub.aclose()
        await self._pub.aclose()
        await self._sub.aclose()


async def redis_pubsub_latencies(redis_url: str, count: int) -> list[float]:
    """Publish → receive latency (ms) of a bare PUBLISH of a ~300 B message,
    one at a time, subscriber already confirmed."""
    floor = PubSubFloor(redis_url)
    await floor.open()
    try:
        return [await floor.sample() for _ in range(count)]
    finally:
        await floor.close()
