"""The tokens section: what token streaming puts on the wire, batched vs not.

A paced token stream (the offline model's pacing: a fixed pause before each
token, like ``OfflineProvider(token_delay=...)``) of ``tokens`` English-like
word tokens runs through the real relay, ``ChunkBatcher`` (16 ms / 200
characters) and ``ChunkPoster`` onto the real Redis bus, once per pacing. The
floor is the same paced stream with every token posted as its own
STREAMING_CHUNK message on the same bus.

Reported per pacing: the measured token rate; messages and stored bytes per
1000 tokens (batched vs one per token, and their ratio); and what posting costs
per token, both ways: wall time spent in bus posts, the worker process's CPU
(token stream, batching and posting) and the Redis server's CPU (its INFO
counters; 10 ms resolution, and anything else on the server counts too).
Nothing is asserted about times.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage, RunRef
from spindle.worker.llm.base import LlmResponse, LlmStreamEvent, TextDelta
from spindle.worker.llm.chunk_batcher import ChunkBatcher
from spindle.worker.llm.token_relay import ChunkSink, relay_tokens
from spindle.worker.posting.chunk_poster import ChunkPoster
from spindle.worker.posting.poster import MessagePoster

_PROSE = (
    "the run keeps every message in a capped list and publishes it on the channel so "
    "that clients which reconnect lose nothing while the model writes its answer"
)


def bench_tokens_text(count: int) -> list[str]:
    """``count`` word tokens (a space before each but the first), ~5 characters each."""
    words = _PROSE.split(" ")
    return [(" " if n else "") + words[n % len(words)] for n in range(count)]


async def paced_stream(tokens: list[str], delay: float) -> AsyncIterator[LlmStreamEvent]:
    for token in tokens:
        if delay:
            await asyncio.sleep(delay)
        yield TextDelta(token)
    yield LlmResponse(message=ChatMessage(role="assistant", content="".join(tokens)))


class _TimedSink:
    """Adds up the wall time the posts of ``sink`` take."""

    def __init__(self, sink: ChunkSink) -> None:
        self.sink = sink
        self.seconds = 0.0

    async def __call__(self, text: str, last: bool) -> None:
        started = time.perf_counter()
        await self.sink(text, last)
        self.seconds += time.perf_counter() - started


async def _redis_cpu(bus: MessageBus) -> float:
    """CPU seconds the Redis server has used so far (user + system)."""
    info = await bus.redis.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def _pass(
    bus: MessageBus, settings: Settings, tokens: list[str], delay: float, *, batched: bool
) -> dict[str, float]:
    """One paced stream of ``tokens``: through the relay and batcher onto the bus
    (``batched``), or every token posted as its own chunk as it comes (the floor)."""
    stream = f"bench-tok-{uuid.uuid4().hex[:10]}"
    run = RunRef(workflow_id=stream, run_id="r", stream_id=stream, graph_name="bench")
    limit = settings.max_message_bytes
    poster = MessagePoster(bus, run, activity_id="llm.1", attempt=1, max_message_bytes=limit)
    chunks = ChunkPoster(poster)
    sink = _TimedSink(chunks)
    redis_before = await _redis_cpu(bus)
    cpu_before = time.process_time()
    started = time.perf_counter()
    if batched:
        await relay_tokens(paced_stream(tokens, delay), ChunkBatcher(), sink)
    else:
        async for event in paced_stream(tokens, delay):
            if isinstance(event, TextDelta):
                await sink(event.text, False)
    elapsed = time.perf_counter() - started
    worker_cpu = time.process_time() - cpu_before
    redis_cpu = await _redis_cpu(bus) - redis_before
    stored = await bus.history(stream)
    await bus.delete_stream(stream)
    return {
        "messages": len(stored),
        "bytes": sum(len(m.raw) for m in stored),
        "post_s": sink.seconds,
        "elapsed_s": elapsed,
        "worker_cpu_s": worker_cpu,
        "redis_cpu_s": redis_cpu,
    }


async def bench_tokens(
    settings: Settings, *, tokens: int = 1000, pacings_ms: tuple[float, ...] = (1.0, 5.0, 20.0)
) -> dict[str, Any]:
    """Messages and bytes on the wire per 1000 tokens, batched vs one per token."""
    # Room for the one-per-token floor: its stream must keep every message.
    bus = MessageBus.from_settings(
        settings.model_copy(update={"history_max_messages": max(tokens + 10, 1000)})
    )
    text = bench_tokens_text(tokens)
    per_k = 1000 / tokens

    def us(seconds: float) -> float:
        return round(seconds / tokens * 1e6, 1)

    rows = []
    try:
        for pacing in pacings_ms:
            batched = await _pass(bus, settings, text, pacing / 1000, batched=True)
            floor = await _pass(bus, settings, text, pacing / 1000, batched=False)
            rows.append(
                {
                    "pacing_ms": pacing,
                    "tokens_per_s": round(tokens / batched["elapsed_s"]),
                    "msgs_per_1k": round(batched["messages"] * per_k, 1),
                    "msgs_per_1k_floor": round(floor["messages"] * per_k, 1),
                    "msgs_ratio": round(batched["messages"] / floor["messages"], 3),
                    "kb_per_1k": round(batched["bytes"] * per_k / 1024, 1),
                    "kb_per_1k_floor": round(floor["bytes"] * per_k / 1024, 1),
                    "post_wall_us_per_token": us(batched["post_s"]),
                    "post_wall_us_per_token_floor": us(floor["post_s"]),
                    "worker_cpu_us_per_token": us(batched["worker_cpu_s"]),
                    "worker_cpu_us_per_token_floor": us(floor["worker_cpu_s"]),
                    "redis_cpu_us_per_token": us(batched["redis_cpu_s"]),
                    "redis_cpu_us_per_token_floor": us(floor["redis_cpu_s"]),
                }
            )
    finally:
        await bus.close()
    return {
        "tokens": tokens,
        "chars_per_token": round(len("".join(text)) / tokens, 2),
        "by_pacing": rows,
    }
