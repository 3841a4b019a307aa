"""The raw floors every Spindle figure is compared against, measured in the same
run: a bare Temporal activity and a bare Redis publish → subscribe."""

from __future__ import annotations

import time
from datetime import timedelta

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


async def redis_pubsub_latencies(redis_url: str, count: int) -> list[float]:
    """Publish → receive latency (ms) of a bare PUBLISH of a ~300 B message,
    one at a time, subscriber already confirmed."""
    from redis.asyncio import Redis

    pub = Redis.from_url(redis_url)
    sub = Redis.from_url(redis_url)
    pubsub = sub.pubsub()
    await pubsub.subscribe("bench:floor")
    await pubsub.get_message(timeout=5)  # the subscribe confirmation
    payload = b"x" * 300
    out: list[float] = []
    for _ in range(count):
        start = time.perf_counter()
        await pub.publish("bench:floor", payload)
        while True:
            msg = await pubsub.get_message(timeout=5)
            if msg is not None and msg["type"] == "message":
                break
        out.append((time.perf_counter() - start) * 1000)
    await pubsub.aclose()
    await pub.aclose()
    await sub.aclose()
    return out
