"""Following one stream with no gap and no duplicate: the one place the invariant lives.

Order of operations (docs/streaming/gap-free.md; docs/design.md §3 and §9):

1. subscribe to the stream's live channel through the process's shared
   ``SubscriptionHub`` and wait until Redis confirmed it;
2. read the backlog after the cursor (``FollowSource.read``);
3. hand out the backlog, then live events, dropping every live event whose
   sequence number the backlog (or an earlier live event) already delivered.

Anything posted before step 1 is in the backlog; anything posted after it
arrives live; what is in both is dropped by seq. A live event that skips a seq
(never expected) makes the follower read the missing ones from the store
rather than jump over them. The follower stops after the message that ends the
stream, when the consumer stops iterating, or when the live feed breaks (a
subscriber whose bounded queue overflowed, a lost Redis connection): then it
either ends (the SSE client resumes with ``Last-Event-ID``) or, with
``resubscribe``, subscribes again and reads what it missed from the store.

An ``after_seq`` cursor is checked against what a ``CheckedSource`` keeps
(``spindle.gateway.streams.cursor``): one older than the oldest message kept,
or beyond the stream's end, raises ``CursorOutOfRange`` from ``open()``; a
catch-up that finds what it missed no longer kept raises ``CursorExpired`` from
``next_batch()``. Never a silent jump.

The follower never parses a message: it hands out the stored bytes with their
seq (``StoredMessage`` from the backlog, ``LiveEvent`` from the live feed, both
``Sequenced``), so the SSE route writes them as they are. What a stream's
messages look like (how to read its backlog, how to see its end, how to
compare a timestamp) is its ``FollowSource``: the run's message list
(``spindle.gateway.streams.run_messages``) or a task tree's event stream
(``spindle.gateway.protocols.jsonrpc.task_event_stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, runtime_checkable

from spindle.shared.bus.hub import Subscription, SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import LiveEvent, StoredMessage

log = logging.getLogger(__name__)

# The backlog is handed out in batches of this many messages.
BACKLOG_CHUNK = 256
# Event-loop timers may fire up to a clock tick early (uvloop: 1 ms).
IDLE_SLACK = 0.002


class Sequenced(Protocol):
    """A message as the follower hands it out: its seq in the stream and its stored bytes."""

    @property
    def seq(self) -> int: ...

    @property
    def raw(self) -> bytes: ...


class FollowSource(Protocol):
    """What a follower needs to know about one kind of stream.

    ``stream_id`` names the hub channel (``live_channel(stream_id)``) whose
    payloads are ``<seq> <ends> <stored bytes>`` (the bus's live format).
    """

    @property
    def stream_id(self) -> str: ...

    async def read(self, after_seq: int, since_ts: int | None) -> list[StoredMessage]:
        """Every stored message with ``seq > after_seq`` (and ``ts > since_ts``), in seq order."""
        ...

    async def last_seq(self) -> int:
        """The last seq assigned on the stream (0 before the first message)."""
        ...

    async def end_seq(self, read: Sequence[StoredMessage]) -> int | None:
        """The seq of the message that ended the stream, None while it goes on.

        Args:
            read: what ``read`` just returned, for a source that finds the end there.
        """
        ...

    def newer_than(self, raw: bytes, since_ts: int) -> bool:
        """True when a stored message's timestamp is above ``since_ts``."""
        ...


@runtime_checkable
class CheckedSource(Protocol):
    """A ``FollowSource`` that can tell whether a read serves a cursor whole
    (``spindle.gateway.streams.cursor``; a run's messages do)."""

    async def check_cursor(self, after_seq: int, read: Sequence[StoredMessage]) -> None:
        """Raise ``CursorOutOfRange`` unless ``read`` (after ``after_seq``) has no gap."""
        ...


@dataclass(frozen=True)
class StreamCursor:
    """Where a follower starts.

    ``after_seq`` (from ``Last-Event-ID``) wins over ``since_ts`` (seed 002's
    ``since`` in epoch ms: only messages with a newer ``ts``, live ones
    included); ``live_only`` (with neither) gives only what is posted after the
    subscription. With none of them the follower starts at the first message.
    """

    after_seq: int | None = None
    since_ts: int | None = None
    live_only: bool = False


class StreamFollower:
    """One stream's messages after a cursor: the backlog, then live, each seq once.

    Use ``open()`` / ``close()`` or ``async with``; then iterate ``batches()``
    (or ``messages()``) once.

    Args:
        source: the kind of stream and which one.
        hub: the process's shared subscription hub.
        cursor: where to start.
        idle_seconds: after this long without a message ``batches()`` yields an
            empty batch (the SSE keep-alive); None waits silently.
        resubscribe: when the live feed breaks, subscribe again and read what
            was missed from the store (else the iteration ends there).
    """

    def __init__(
        self,
        source: FollowSource,
        *,
        hub: SubscriptionHub,
        cursor: StreamCursor | None = None,
        idle_seconds: float | None = None,
        resubscribe: bool = False,
    ) -> None:
        self.source = source
        self._hub = hub
        self._cursor = cursor or StreamCursor()
        self._idle = idle_seconds
        self._resubscribe = resubscribe
        self._stack = contextlib.AsyncExitStack()
        self._sub: Subscription | None = None
        self._backlog: list[StoredMessage] = []
        self._since = self._cursor.since_ts if self._cursor.after_seq is None else None
        # One idle timer per follower, re-armed once per idle period rather than
        # once per message (see ``_next_burst``).
        self._idle_timer: asyncio.TimerHandle | None = None
        self._waiting = False
        self._waiting_since = 0.0
        self._sink: Callable[[Sequenced], bool] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.last_seq = 0
        """The highest seq handed out (or passed over as older than ``since``)."""
        self.ended = False
        """The message that ends the stream was reached: nothing follows it."""

    @property
    def stream_id(self) -> str:
        return self.source.stream_id

    @property
    def backlog_pending(self) -> bool:
        """Stored messages read at ``open()`` are waiting to be handed out."""
        return bool(self._backlog)

    def hand_live_to(self, sink: Callable[[Sequenced], bool] | None) -> None:
        """Offer each live message to ``sink`` as it arrives, while ``next_batch`` waits.

        The hub's reader calls ``sink`` with the next message in order (never
        the message that ends the stream, nor one a ``since`` cursor may
        filter out) while the consumer waits in ``next_batch`` with nothing
        queued. True: the sink has delivered it, and the follower counts it
        as handed out (``last_seq``; the idle period starts again). False:
        it is queued, and ``next_batch`` returns it. A consumer whose sink
        starts something it does not finish (a write the client is slow to
        read) declines the next messages until it has; they come from
        ``next_batch``, and it finishes the pending one before it hands those
        out, so the order holds. None stops the offers.
        """
        self._sink = sink

    async def open(self) -> None:
        """Subscribe, then read the backlog; from here on nothing can be missed.

        Raises:
            SubscriptionLost: no confirmed subscription.
            RedisError: the store cannot be read.
            CursorOutOfRange: an ``after_seq`` cursor older than what a checked
                source keeps, or beyond its end (``streams.cursor``).
        """
        self._sub = await self._stack.enter_async_context(self._hub.subscribe(self.stream_id))
        try:
            backlog = await self._start_backlog()
            end = await self.source.end_seq(backlog)
            last_read = backlog[-1].seq if backlog else self.last_seq
            if end is not None and last_read >= end:
                # Nothing is posted after the end: hand out up to it and stop.
                backlog = [m for m in backlog if m.seq <= end]
                self.ended = True
            self._backlog = backlog
        except BaseException:
            await self.close()
            raise

    async def _start_backlog(self) -> list[StoredMessage]:
        cursor = self._cursor
        if cursor.after_seq is not None:
            self.last_seq = cursor.after_seq
            backlog = await self.source.read(cursor.after_seq, None)
            if isinstance(self.source, CheckedSource):
                # A cursor older than what is kept, or past the end: an error, not a jump.
                await self.source.check_cursor(cursor.after_seq, backlog)
            return backlog
        if cursor.since_ts is not None:
            # Every seq up to the current one is either in the backlog read
            # next (ts > since) or older than the cursor; later ones come live
            # and are still compared with ``since``.
            self.last_seq = await self.source.last_seq()
            backlog = await self.source.read(0, cursor.since_ts)
            if backlog:
                self.last_seq = min(self.last_seq, backlog[0].seq - 1)
            return backlog
        if cursor.live_only:
            self.last_seq = await self.source.last_seq()
            return []
        return await self.source.read(0, None)

    async def close(self) -> None:
        """Leave the live channel (idempotent)."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        await self._stack.aclose()

    async def __aenter__(self) -> StreamFollower:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def messages(self) -> AsyncGenerator[Sequenced, None]:
        """``batches()`` one message at a time (no keep-alive gaps)."""
        async with contextlib.aclosing(self.batches()) as batches:
            async for batch in batches:
                for message in batch:
                    yield message

    async def batches(self) -> AsyncGenerator[list[Sequenced], None]:
        """The backlog in chunks, then each burst of live messages as it arrives.

        Ends after the message that ends the stream, or when the live feed
        breaks (without ``resubscribe``). An empty batch means ``idle_seconds``
        passed with nothing to hand out.
        """
        while (batch := await self.next_batch()) is not None:
            yield batch

    async def next_batch(self) -> list[Sequenced] | None:
        """The next batch ``batches()`` yields, or None where it ends.

        For a consumer on the fan-out path (the SSE pump): awaiting this
        directly rather than an async generator keeps a viewer's wake-up a few
        frames shorter, which with a thousand viewers of one run is most of
        the gateway's own time per message (docs/benchmarks-history.md#stream-path).
        """
        assert self._sub is not None, "open() first"
        if self._backlog:
            chunk: list[Sequenced] = list(self._backlog[:BACKLOG_CHUNK])
            del self._backlog[:BACKLOG_CHUNK]
            self.last_seq = chunk[-1].seq
            return chunk
        while not self.ended:
            try:
                events = await self._next_burst()
            except TimeoutError:
                return []
            except SubscriptionLost as exc:
                log.info("follow of %s: live feed lost (%s)", self.stream_id, exc)
                if not self._resubscribe:
                    return None
                batch = await self._rejoin()
            else:
                in_order = self._in_order(events)
                batch = in_order if in_order is not None else await self._new_among(events)
            if batch:
                return batch
        return None

    async def _next_burst(self) -> list[LiveEvent]:
        """The next live event and whatever queued behind it (one write for all).

        Raises:
            TimeoutError: ``idle_seconds`` passed with nothing (a keep-alive is due).
        """
        sub = self._sub
        assert sub is not None
        loop = self._loop = asyncio.get_running_loop()
        self._waiting_since = loop.time()
        sub.taker = self._offer if self._sink is not None else None
        try:
            first = await self._wait_first(sub, loop)
        finally:
            sub.taker = None
        events = [first]
        with contextlib.suppress(SubscriptionLost):  # the next get() reports it
            while (more := sub.get_nowait()) is not None:
                events.append(more)
        return events

    async def _wait_first(self, sub: Subscription, loop: asyncio.AbstractEventLoop) -> LiveEvent:
        if self._idle is None:
            return await sub.get()
        # Not a timeout per wait (asyncio.timeout / wait_for): with many
        # viewers arming and cancelling one timer per message per viewer
        # was a sixth of the gateway's CPU. The follower's one timer pokes
        # the subscription when the wait has lasted ``idle_seconds``.
        if self._idle_timer is None:
            self._idle_timer = loop.call_at(self._waiting_since + self._idle, self._idle_due)
        self._waiting = True
        try:
            while (event := await sub.get_or_poked()) is None:
                if loop.time() >= self._waiting_since + self._idle - IDLE_SLACK:
                    raise TimeoutError
        finally:
            self._waiting = False
        return event

    def _offer(self, event: LiveEvent) -> bool:
        """The subscription's taker while ``next_batch`` waits (``hand_live_to``)."""
        sink = self._sink
        if (
            sink is None
            or event.ends
            or self._since is not None
            or event.seq != self.last_seq + 1
            or not sink(event)
        ):
            return False
        self.last_seq = event.seq
        if self._loop is not None:
            self._waiting_since = self._loop.time()
        return True

    def _idle_due(self) -> None:
        """The idle timer: poke the waiter if it has waited long enough, else re-arm."""
        assert self._idle is not None
        if not self._waiting:
            # Nobody waits (the consumer is busy, or gone without close()):
            # the next wait arms a fresh timer, so none outlives the consumer.
            self._idle_timer = None
            return
        loop = asyncio.get_running_loop()
        due = self._waiting_since + self._idle
        if loop.time() < due - IDLE_SLACK:
            self._idle_timer = loop.call_at(due, self._idle_due)
            return
        self._idle_timer = loop.call_at(loop.time() + self._idle, self._idle_due)
        if self._sub is not None:
            self._sub.poke()

    def _in_order(self, events: list[LiveEvent]) -> list[Sequenced] | None:
        """``_new_among`` when no seq is missing (the usual case, without a
        coroutine); None, with nothing taken, when one is."""
        out: list[Sequenced] = []
        since = self._since
        last = self.last_seq
        for event in events:
            if event.seq <= last:
                continue
            if event.seq > last + 1:
                return None
            last = event.seq
            if since is None or self.source.newer_than(event.raw, since):
                out.append(event)
            if event.ends:
                self.ended = True
                break
        self.last_seq = last
        return out

    async def _new_among(self, events: list[LiveEvent]) -> list[Sequenced]:
        out: list[Sequenced] = []
        since = self._since
        for event in events:
            if event.seq <= self.last_seq:
                continue  # the backlog (or a gap fill) already handed it out
            if event.seq > self.last_seq + 1:
                # Never expected (subscribe-first leaves no gap), but if it
                # happens read what is missing rather than skip it.
                out.extend(await self._catch_up())
                if self.ended:
                    break
                if event.seq <= self.last_seq:
                    continue
            self.last_seq = event.seq
            if since is None or self.source.newer_than(event.raw, since):
                out.append(event)
            if event.ends:
                self.ended = True
                break
        return out

    async def _rejoin(self) -> list[Sequenced]:
        """Subscribe again, then read from the store what the broken feed missed."""
        await self._stack.aclose()
        self._stack = contextlib.AsyncExitStack()
        self._sub = await self._stack.enter_async_context(self._hub.subscribe(self.stream_id))
        return await self._catch_up()

    async def _catch_up(self) -> list[Sequenced]:
        """Stored messages after ``last_seq``, up to the end if the stream has one.

        Raises:
            CursorExpired: what was missed is no longer kept (a checked source):
                the consumer says so rather than skip it.
        """
        stored = await self.source.read(self.last_seq, None)
        if stored and isinstance(self.source, CheckedSource):
            await self.source.check_cursor(self.last_seq, stored)
        end = await self.source.end_seq(stored)
        since = self._since
        out: list[Sequenced] = []
        for message in stored:
            if message.seq <= self.last_seq:
                continue
            if end is not None and message.seq > end:
                break
            self.last_seq = message.seq
            if since is None or self.source.newer_than(message.raw, since):
                out.append(message)
        if end is not None and self.last_seq >= end:
            self.ended = True
        return out
