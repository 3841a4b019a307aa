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

from spindle.worker.llm.base import LlmResponse, LlmStreamEvent, TextDelta
from spindle.worker.llm.chunk_batcher import ChunkBatcher

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
    relay = _Relay(events, batcher, sink)
    try:
        response = await relay.read_all()
    finally:
        await relay.close()
    if response is None:
        raise RuntimeError("the LLM stream ended without a response")
    last = batcher.finish()
    if relay.posted:
        for text in relay.queued:
            await sink(text, False)
        await sink(last or "", True)
    return response


class _Relay:
    """The state of one relay: the event being awaited and the chunks not yet posted."""

    def __init__(
        self, events: AsyncIterator[LlmStreamEvent], batcher: ChunkBatcher, sink: ChunkSink
    ) -> None:
        self.events = events
        self.batcher = batcher
        self.sink = sink
        self.queued: list[str] = []
        self.posted = False
        self.pending: asyncio.Future[LlmStreamEvent] | None = None

    async def read_all(self) -> LlmResponse | None:
        """Read every event; the last ``LlmResponse`` seen is the answer."""
        response: LlmResponse | None = None
        while True:
            ready = await self._next_event()
            self.pending = None
            try:
                event = ready.result()
            except StopAsyncIteration:
                return response
            if isinstance(event, TextDelta):
                self.queued += self.batcher.add(event.text)
            elif isinstance(event, LlmResponse):
                response = event

    async def _next_event(self) -> asyncio.Future[LlmStreamEvent]:
        """Wait for the next event, posting chunks that fall due meanwhile."""
        while True:
            if self.pending is None:
                self.pending = asyncio.ensure_future(anext(self.events))
                # One turn of the loop: an event that is already there is read
                # before anything is posted.
                await asyncio.sleep(0)
            if self.pending.done():
                return self.pending
            if self.queued:
                for text in self.queued:
                    await self.sink(text, False)
                self.queued.clear()
                self.posted = True
                continue  # the post took time: look at the event again
            deadline = self.batcher.deadline()
            timeout = None if deadline is None else max(0.0, deadline - self.batcher.clock())
            await asyncio.wait({self.pending}, timeout=timeout)
            if not self.pending.done():
                self.queued += self.batcher.due()

    async def close(self) -> None:
        """Cancel the event still awaited and close the provider's stream."""
        if self.pending is not None and not self.pending.done():
            self.pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await self.pending
        closing = getattr(self.events, "aclose", None)
        if closing is not None:
            await closing()
