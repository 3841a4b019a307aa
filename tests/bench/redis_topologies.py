"""The bus on one Redis server vs a three-master Redis Cluster, same machine.

For each topology: a post's round trip (the one Lua script), and post → live
receipt through the subscription hub (one subscriber), p50/p99 in ms, each
against its raw floor measured in the same run (a bare ``PUBLISH`` →
``SUBSCRIBE`` on the server, a bare ``SPUBLISH`` → ``SSUBSCRIBE`` on the
channel's cluster node). Both topologies run on loopback servers this section
starts itself, so the cluster's figures show what routing and sharded pub/sub
cost, not a network.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from spindle.dev.processes import free_port
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus, live_channel
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from tests.integration.redis_topologies import RedisTopology, redis_node, start_cluster

WARMUP = 50


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 3), "p99_ms": _pct(values, 0.99)}


async def _floor(topology: RedisTopology, channel: str, count: int) -> list[float]:
    """Bare publish → receive on the channel's node, subscriber confirmed first."""
    port = topology.port_of(channel)
    pub, sub = aioredis.Redis(port=port), aioredis.Redis(port=port)
    pubsub = sub.pubsub()
    sharded = topology.sharded
    await (pubsub.ssubscribe(channel) if sharded else pubsub.subscribe(channel))
    await pubsub.get_message(timeout=5)
    payload = b"1 0 " + b"x" * 300
    out: list[float] = []
    try:
        for i in range(count + WARMUP):
            start = time.perf_counter()
            command = "SPUBLISH" if sharded else "PUBLISH"
            await pub.execute_command(command, channel, payload)
            while True:
                msg = await pubsub.get_message(timeout=5)
                if msg is not None and msg["type"] in ("message", "smessage"):
                    break
            if i >= WARMUP:
                out.append((time.perf_counter() - start) * 1000)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
        await pub.aclose()
        await sub.aclose()
    return out


async def _bus_figures(topology: RedisTopology, count: int) -> dict[str, Any]:
    stream = f"bench-{uuid.uuid4().hex[:8]}"
    bus = MessageBus(topology.client())
    hub_client = topology.client()
    hub = SubscriptionHub(hub_client)
    await hub.start()
    message = CompactMessage(t=AgentMessageType.UPDATE, m="x" * 280)
    posts: list[float] = []
    live: list[float] = []
    try:
        async with hub.subscribe(stream) as sub:
            for i in range(count + WARMUP):
                start = time.perf_counter()
                await bus.post(stream, message)
                posted = time.perf_counter()
                await asyncio.wait_for(sub.get(), 5)
                if i >= WARMUP:
                    posts.append((posted - start) * 1000)
                    live.append((time.perf_counter() - start) * 1000)
        floor = await _floor(topology, live_channel(stream), count)
    finally:
        await hub.stop()
        await hub_client.aclose()
        await bus.close()
    return {
        "post": _summary(posts),
        "post_to_live": _summary(live),
        "floor_publish_to_receive": _summary(floor),
        "post_to_live_vs_floor_p50": round(statistics.median(live) / statistics.median(floor), 2),
    }


async def bench_redis_topologies(count: int) -> dict[str, Any]:
    """Post and live-delivery latency of the bus on a server and on a cluster."""
    with tempfile.TemporaryDirectory(prefix="spindle-bench-redis-") as tmp:
        data = Path(tmp)
        port = free_port()
        server = redis_node(data / "single", port).start()
        processes, cluster = start_cluster(data / "cluster", [free_port() for _ in range(3)])
        try:
            single = RedisTopology("standalone", f"redis://127.0.0.1:{port}/0", [port])
            results = {
                "messages": count,
                "standalone": await _bus_figures(single, count),
                "cluster_3_masters": await _bus_figures(cluster, count),
            }
        finally:
            server.stop()
            for process in processes:
                process.stop()
    results["cluster_vs_standalone_post_p50"] = round(
        results["cluster_3_masters"]["post"]["p50_ms"] / results["standalone"]["post"]["p50_ms"], 2
    )
    results["cluster_vs_standalone_live_p50"] = round(
        results["cluster_3_masters"]["post_to_live"]["p50_ms"]
        / results["standalone"]["post_to_live"]["p50_ms"],
        2,
    )
    return results


if __name__ == "__main__":
    import json

    print(json.dumps(asyncio.run(bench_redis_topologies(1000)), indent=2))
