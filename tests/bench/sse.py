"""The ``sse`` benchmark section: a message posted to the bus → its SSE line at a
viewer of the gateway, against a bare Redis publish → subscribe, and the post alone
(``PostWithoutGateway``) against the same floor."""

from __future__ import annotations

import gc
import time
import uuid
from typing import Any

import httpx
import redis.asyncio as aioredis

from spindle.shared.bus.message_bus import MessageBus, live_channel
from spindle.shared.contracts.messages import (
    AgentMessageType,
    CompactMessage,
    create_compact_message,
)
from spindle.shared.platform.settings import Settings
from tests.bench.floor import PubSubFloor, next_message


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class PostWithoutGateway:
    """``MessageBus.post`` → a redis-py subscriber of the stream's live channel,
    with no gateway between: what the post (its script stores, sequences and
    publishes) costs before the gateway's hop. Sampled between the SSE samples
    and their floor's, on a stream of its own that no viewer watches."""

    def __init__(self, settings: Settings, bus: MessageBus) -> None:
        self._bus = bus
        self._stream_id = f"bench-post-{uuid.uuid4().hex}"
        self._sub = aioredis.Redis.from_url(settings.redis_url)
        self._pubsub = self._sub.pubsub()

    async def open(self) -> None:
        await self._pubsub.subscribe(live_channel(self._stream_id))
        await self._pubsub.get_message(timeout=5)  # the subscribe confirmation

    async def sample(self, message: CompactMessage) -> float:
        """One post → receive latency, ms."""
        start = time.perf_counter()
        await self._bus.post(self._stream_id, message)
        await next_message(self._pubsub)
        return (time.perf_counter() - start) * 1000

    async def close(self) -> None:
        await self._pubsub.aclose()
        await self._sub.aclose()
        await self._bus.delete_stream(self._stream_id)


async def bench_sse(settings: Settings, base_url: str, messages: int) -> dict[str, Any]:
    bus = MessageBus.from_settings(settings)
    stream_id = f"bench-sse-{uuid.uuid4().hex}"
    await bus.set_meta(stream_id, {"run_id": "bench", "tenant_id": "default", "graph": "bench"})
    await bus.post(stream_id, create_compact_message(AgentMessageType.SYSTEM, "open"))
    latencies: list[float] = []
    floor: list[float] = []
    posts: list[float] = []
    text = "progress " * 28  # ~250 characters: a typical UPDATE
    async with (
        httpx.AsyncClient(timeout=30) as http,
        http.stream(
            "GET", f"{base_url}/runs/{stream_id}/bench/stream", params={"skipHistory": "true"}
        ) as resp,
    ):
        resp.raise_for_status()
        lines = resp.aiter_lines()
        # First confirm the stream is live: the gateway subscribes before replaying.
        await bus.post(stream_id, create_compact_message(AgentMessageType.SYSTEM, "ready"))
        async for line in lines:
            if line.startswith("data:") and "ready" in line:
                break
        # Interleaved with its floor, message by message, and with this process's
        # collector off: a pause of the bench client's own would land on one side.
        floor_pair = PubSubFloor(settings.redis_url)
        await floor_pair.open()
        post_only = PostWithoutGateway(settings, bus)
        await post_only.open()
        gc.collect()
        gc.disable()
        try:
            for i in range(messages):
                floor.append(await floor_pair.sample())
                posts.append(
                    await post_only.sample(
                        create_compact_message(AgentMessageType.UPDATE, text, details={"step": i})
                    )
                )
                start = time.perf_counter()
                await bus.post(
                    stream_id,
                    create_compact_message(AgentMessageType.UPDATE, text, details={"step": i}),
                )
                async for line in lines:
                    if line.startswith("data:"):
                        break
                latencies.append((time.perf_counter() - start) * 1000)
        finally:
            gc.enable()
            await floor_pair.close()
            await post_only.close()
    await bus.delete_stream(stream_id)
    await bus.close()
    p50, p99 = pct(latencies, 0.5), pct(latencies, 0.99)
    f50, f99 = pct(floor, 0.5), pct(floor, 0.99)
    o50, o99 = pct(posts, 0.5), pct(posts, 0.99)
    return {
        "messages": messages,
        "sse_p50_ms": round(p50, 3),
        "sse_p99_ms": round(p99, 3),
        "redis_pubsub_p50_ms": round(f50, 3),
        "redis_pubsub_p99_ms": round(f99, 3),
        "p50_ratio": round(p50 / f50, 2),
        "p99_ratio": round(p99 / f99, 2),
        # The post alone (no gateway), against the same floor: what of the
        # ratio is the post's script rather than the gateway's hop.
        "post_pubsub_p50_ms": round(o50, 3),
        "post_pubsub_p99_ms": round(o99, 3),
        "post_p50_ratio": round(o50 / f50, 2),
        "post_p99_ratio": round(o99 / f99, 2),
    }
