"""Relaying a provider's token stream through a ``ChunkBatcher`` to a chunk sink.

One coroutine reads the provider's events and hands the batcher's chunks to the
sink in order. Reading the next event runs as a task of its own, so the model's
stream keeps arriving while a chunk is being posted, and while the relay waits
for the next token it also wakes up when the batcher's window falls due: a token
never waits longer than the batcher's interval, even when the model pauses.

Chunks go out when the relay would otherwise wait for the model. Events that are
already there are read first, so a reply that arrives complete before any chunk
went out (a cached reply, the offline model without pacing) posts no chunk at
all: its final THOUGHT/ANSWER follows at once and would supersede them anyway.
Once a chunk has gone out, every later one does, the last with ``last=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from worker.llm.base import LlmResponse, LlmStreamEvent, TextDelta
from worker.llm.chunk_batcher import ChunkBatcher

ChunkSink = Callable[[str, bool], Awaitable[None]]
"""Called with (chunk text, is the last chunk) for each chunk, in order."""


async def relay_tokens(
    events: AsyncIterator[LlmStreamEvent], batcher: ChunkBatcher, sink: ChunkSink
) -> LlmResponse:
    """Feed ``events`` through ``batcher`` to ``sink``; return the final response.

    Waits are measured on the batcher's clock, so it must be a real clock
    (``time.monotonic``) for the timed flushes to fall on time.

    Raises:
        RuntimeError: the stream ended without an ``LlmResponse``.
        Exception: whatever the provider's stream or the sink raises.
    """
    response: LlmResponse | None = None
    queued: list[str] = []
    posted = False
    next_event: asyncio.Future[LlmStreamEvent] | None = None
    try:
        while True:
            if next_event is None:
                next_event = asyncio.ensure_future(anext(events))
                # One turn of the loop: an event that is already there is read
                # before anything is posted.
                await asyncio.sleep(0)
            if not next_event.done():
                if queued:
                    for text in queued:
                        await sink(text, False)
                    queued.clear()
                    posted = True
                    continue  # the post took time: look at the event again
                deadline = batcher.deadline()
                if deadline is None:
                    await asyncio.wait({next_event})
                else:
                    await asyncio.wait({next_event}, timeout=max(0.0, deadline - batcher.clock()))
                    if not next_event.done():
                        queued += batcher.due()
                        continue
            try:
                event = next_event.result()
            except StopAsyncIteration:
                break
            next_event = None
            if isinstance(event, TextDelta):
                queued += batcher.add(event.text)
            elif isinstance(event, LlmResponse):
                response = event
    finally:
        if next_event is not None and not next_event.done():
            next_event.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await next_event
        closing = getattr(events, "aclose", None)
        if closing is not None:
            await closing()
    if response is None:
        raise RuntimeError("the LLM stream ended without a response")
    last = batcher.finish()
    if posted:
        for text in queued:
            await sink(text, False)
        await sink(last or "", True)
    return response
