"""The SSE stream of one run: backlog, then live messages, with no gap and no duplicate.

The no-gap/no-duplicate part (subscribe first, backlog, live, drop by seq, stop
at the end) is ``spindle.gateway.streams.follower.StreamFollower``; this module
is its SSE framing. Frames are written from the stored bytes (``id: <seq>``
then ``data: <compact JSON>``), never re-encoded; ``: keep-alive`` comments
fill idle time. The response ends right after the message that ends the
conversation, and when the live feed breaks (``SubscriptionLost``) so that the
client resumes with ``Last-Event-ID``. A cursor that cannot be served whole
(older than what is kept, or beyond the run's end: ``streams.cursor``) is a
problem before any stream (410 / 400, naming ``oldestSeq`` / ``lastSeq``), or,
found mid-stream, an ``event: error`` frame that ends it; never a silent jump.
When the gateway process stops,
``StreamDrain`` ends every open stream at once with a ``retry:`` hint
(``spindle.gateway.http.stream_drain``), for the same resume elsewhere. A live
frame that finds the stream waiting is written from the subscription hub's
dispatch rather than by the stream's task
(docs/streaming/gap-free.md#what-a-live-message-costs-a-gateway).

The response is a plain ASGI app rather than a ``StreamingResponse`` so that
headers are sent only once the subscription is confirmed (a client that sees
200 is live), and so that a client disconnect is noticed at once rather than
at the next write.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable

import orjson
from redis.exceptions import RedisError
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from spindle.gateway.http.problems import spindle_problem
from spindle.gateway.http.server_send import body_send, send_now
from spindle.gateway.http.stream_drain import StreamDrain
from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.streams.cursor import CursorOutOfRange
from spindle.gateway.streams.follower import (
    BACKLOG_CHUNK,
    Sequenced,
    StreamCursor,
    StreamFollower,
)
from spindle.gateway.streams.run_messages import BacklogReader, RunMessages
from spindle.shared.bus.hub import SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import Unavailable
from spindle.shared.platform import metrics
from spindle.shared.store.archive import RunArchive

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
    "Connection": "keep-alive",
}
# How long a cancelled stream task may take to stop before the response ends anyway.
CANCEL_GRACE_SECONDS = 2.0

__all__ = [
    "BACKLOG_CHUNK",
    "BacklogReader",
    "EventStreamResponse",
    "RunEventStream",
    "StreamCursor",
    "frame",
]


WriteNow = Callable[[bytes], "asyncio.Future[None] | None"]
"""Writes a body chunk at once; None when written, else a future of the write (``send_now``)."""


def frame(seq: int, raw: bytes) -> bytes:
    """One SSE event: ``id: <seq>`` and ``data: <stored JSON>`` (unnamed event)."""
    return b"id: %d\ndata: %s\n\n" % (seq, raw)


def error_frame(error: CursorOutOfRange) -> bytes:
    """The ``event: error`` that ends a stream whose cursor cannot be served whole.

    No ``id:``: the client's ``Last-Event-ID`` stays the last message it got.
    """
    return b"event: error\ndata: %s\n\n" % orjson.dumps(error.problem())


class _LastFrame:
    """The frame of the live message being dispatched, made once for all its viewers.

    The hub hands every viewer of a stream the same event (the same ``raw``
    bytes object), one viewer after another.
    """

    raw: bytes | None = None
    frame: bytes = b""

    @classmethod
    def of(cls, message: Sequenced) -> bytes:
        if message.raw is not cls.raw:
            cls.raw, cls.frame = message.raw, frame(message.seq, message.raw)
        return cls.frame


# Live frames written from the hub's dispatch are counted per stream and added to
# the delivered-messages metric every this many (and whenever the stream's task
# wakes or the stream ends): a metric update per viewer per message was an
# eighth of the dispatch's own Python time with 1,000 viewers.
LIVE_COUNT_EVERY = 64


class RunEventStream:
    """Backlog + live events of one run's stream, as SSE frames.

    Args:
        stream_id: the run's stream (its workflow id).
        read_backlog: ``(after_seq, since_ts) -> stored messages`` (Redis, then archive).
        cursor: where the client resumes.
        keepalive_seconds: idle time after which a comment line is sent.
        retry_ms: the reconnection delay hinted to EventSource clients.
        lease: the stream's slot of its tenant's stream limit: refreshed at
            least once per keep-alive interval while the stream is open (at each
            keep-alive, and, since a busy stream sends no keep-alives, in the
            background after frames once due, at a time spread over half an
            interval), released by ``close()``.
        on_idle: awaited every ``idle_every`` keep-alives in a row: asks whether
            the run was closed from outside Spindle, and if so posts its closing
            message, which then ends this stream like any other.
        idle_every: keep-alives between two ``on_idle`` calls (0: never).
        archive: where ``read_backlog`` reads older messages (None: Redis only),
            for the check of the client's cursor.
    """

    def __init__(
        self,
        stream_id: str,
        *,
        hub: SubscriptionHub,
        bus: MessageBus,
        read_backlog: BacklogReader,
        cursor: StreamCursor,
        keepalive_seconds: float,
        retry_ms: int = 2000,
        lease: StreamLease | None = None,
        on_idle: Callable[[], Awaitable[object]] | None = None,
        idle_every: int = 0,
        archive: RunArchive | None = None,
    ) -> None:
        self.stream_id = stream_id
        self._on_idle = on_idle if idle_every > 0 else None
        self._idle_every = idle_every
        self._idle_ticks = 0
        self._cursor = cursor
        self._follower = StreamFollower(
            RunMessages(stream_id, bus=bus, read_backlog=read_backlog, archive=archive),
            hub=hub,
            cursor=cursor,
            idle_seconds=keepalive_seconds,
        )
        self._keepalive = keepalive_seconds
        self._retry_ms = retry_ms
        self._lease = lease
        self._lease_due = time.monotonic() + self._lease_period()
        self._lease_refreshing: asyncio.Task[None] | None = None
        self._write_now: WriteNow | None = None
        self._pending_write: asyncio.Future[None] | None = None
        self._live_uncounted = 0

    async def open(self) -> None:
        """Subscribe, then read the backlog; after this nothing can be missed.

        Raises:
            SubscriptionLost: no confirmed subscription.
            RedisError: the store cannot be read.
        """
        try:
            await self._follower.open()
        except BaseException:
            await self.close()
            raise

    @property
    def last_sent(self) -> int:
        """The seq of the last message written (or passed over as older than ``since``)."""
        return self._follower.last_seq

    @property
    def ended(self) -> bool:
        """The message that ends the conversation was reached."""
        return self._follower.ended

    @property
    def resumed(self) -> bool:
        """The client reconnected with a Last-Event-ID (header or query)."""
        return self._cursor.after_seq is not None

    @property
    def nothing_to_send(self) -> bool:
        """The conversation ended before this cursor: the stream would be empty."""
        return self._follower.ended and not self._follower.backlog_pending

    async def close(self) -> None:
        """Leave the live channel and give the stream's slot back (idempotent)."""
        try:
            await self._follower.close()
        finally:
            if self._lease is not None:
                refreshing = self._lease_refreshing
                if refreshing is not None:
                    # A refresh landing after the release would re-add the slot.
                    await asyncio.wait({refreshing}, timeout=CANCEL_GRACE_SECONDS)
                await self._lease.release()

    def _lease_period(self) -> float:
        # Spread over half an interval: streams opened together (a page of
        # viewers, a reconnect storm) would otherwise all refresh on the same
        # message, a Redis round trip each in one burst.
        return self._keepalive * random.uniform(0.5, 1.0)

    async def _refresh_lease(self) -> None:
        """At a keep-alive: refresh the slot now (the stream is idle anyway)."""
        if self._lease is None:
            return
        self._lease_due = time.monotonic() + self._lease_period()
        await self._lease.refresh()

    def _refresh_lease_if_due(self) -> None:
        """After frames: when due, refresh in the background, never holding up the next frame."""
        if self._lease is None:
            return
        now = time.monotonic()
        if now < self._lease_due:
            return
        if self._lease_refreshing is not None and not self._lease_refreshing.done():
            return
        self._lease_due = now + self._lease_period()
        self._lease_refreshing = asyncio.create_task(self._lease.refresh())

    async def pump(
        self, write: Callable[[bytes], Awaitable[None]], write_now: WriteNow | None = None
    ) -> None:
        """Write the backlog, then live frames, until the conversation ends or
        the live feed breaks.

        Args:
            write: writes a body chunk.
            write_now: writes a body chunk from plain code (``send_now``). With
                it, a live message that finds the stream waiting is written
                from the subscription hub's dispatch, not by this task
                (``StreamFollower.hand_live_to``): with a thousand viewers
                of one run, waking a task per viewer per message made the
                last viewer's frame about a third later
                (docs/benchmarks-history.md#live-frames-from-the-hubs-dispatch-issue-17).
        """
        head = b"retry: %d\n\n" % self._retry_ms
        if not self._follower.backlog_pending:
            await write(head)
            head = b""
        self._write_now = write_now
        if write_now is not None:
            self._follower.hand_live_to(self._write_live)
        try:
            while (batch := await self._next_batch()) is not None:
                if isinstance(batch, CursorOutOfRange):
                    await self._settle_write()
                    await write(head + error_frame(batch))
                    break
                self._count_live()
                await self._settle_write()
                if not batch:
                    await write(KEEPALIVE)
                    await self._refresh_lease()
                    await self._idle_tick()
                    continue
                self._idle_ticks = 0
                await write(head + b"".join([frame(m.seq, m.raw) for m in batch]))
                head = b""
                metrics.messages_delivered(len(batch))
                self._refresh_lease_if_due()
            await self._settle_write()
        finally:
            self._follower.hand_live_to(None)
            self._count_live()
            pending, self._pending_write = self._pending_write, None
            if pending is not None:
                # The frame it holds may not be out; the client resumes after
                # the last id it got, and frames are written whole.
                pending.cancel()

    async def _next_batch(self) -> list[Sequenced] | CursorOutOfRange | None:
        """The follower's next batch, or the error that ends the stream explicitly."""
        try:
            return await self._follower.next_batch()
        except CursorOutOfRange as exc:  # a catch-up found what it missed no longer kept
            log.info("stream %s: %s", self.stream_id, exc.detail)
            return exc

    def _write_live(self, message: Sequenced) -> bool:
        """The follower's sink: write one live frame now, from the hub's dispatch."""
        write_now = self._write_now
        pending = self._pending_write
        if write_now is None:
            return False
        if pending is not None:
            if not pending.done() or pending.cancelled() or pending.exception() is not None:
                return False  # after the frame that waits for the client (or the pump's error)
            self._pending_write = None
        try:
            self._pending_write = write_now(_LastFrame.of(message))
        except Exception as exc:  # the pump meets it again and ends the stream
            log.info("stream %s: a live write failed: %r", self.stream_id, exc)
            self._write_now = None
            return False
        self._idle_ticks = 0
        self._live_uncounted += 1
        if self._live_uncounted >= LIVE_COUNT_EVERY:
            self._count_live()
        self._refresh_lease_if_due()
        return True

    def _count_live(self) -> None:
        if self._live_uncounted:
            metrics.messages_delivered(self._live_uncounted)
            self._live_uncounted = 0

    async def _settle_write(self) -> None:
        """Wait for a live frame the client was slow to take, before anything after it."""
        pending = self._pending_write
        if pending is not None:
            await pending
            self._pending_write = None

    async def _idle_tick(self) -> None:
        if self._on_idle is None:
            return
        self._idle_ticks += 1
        if self._idle_ticks % self._idle_every:
            return
        try:
            await self._on_idle()
        except Exception as exc:  # the stream goes on; the next check retries
            log.info("stream %s: closed-run check failed: %r", self.stream_id, exc)


class EventStreamResponse(Response):
    """ASGI response for a ``RunEventStream``.

    Sends headers only after ``open()`` succeeded (503 problem otherwise; 410
    or 400 problem when the cursor is older than what is kept or beyond the
    run's end; 204 when the run ended at the client's cursor so EventSource stops
    reconnecting), and stops as soon as the client disconnects. With a
    ``drain``, it also ends, with a ``retry:`` hint, once the process stops.
    """

    media_type = "text/event-stream"

    def __init__(self, stream: RunEventStream, *, drain: StreamDrain | None = None) -> None:
        # No body and no Content-Length: Response.__init__ would render one.
        self.stream = stream
        self.drain = drain
        self.status_code = 200
        self.background = None
        self.init_headers({"content-type": "text/event-stream; charset=utf-8", **SSE_HEADERS})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.stream.open()
        except (SubscriptionLost, RedisError, OSError) as exc:
            log.warning("stream %s cannot open: %s", self.stream.stream_id, exc)
            error = Unavailable("the live message feed (Redis) is unavailable", retry_after=2)
            await spindle_problem(error, scope.get("path"))(scope, receive, send)
            return
        except CursorOutOfRange as exc:
            # EventSource gives up on a non-200 answer: the client is told, not looped.
            await spindle_problem(exc, scope.get("path"))(scope, receive, send)
            return
        counted = False
        try:
            if self.stream.nothing_to_send:
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            metrics.stream_opened(resumed=self.stream.resumed)
            counted = True

            # Frames skip Starlette's send wrappers, which have seen the start
            # (spindle.gateway.http.server_send).
            frames_send = body_send(scope, send)

            async def write(body: bytes) -> None:
                await frames_send({"type": "http.response.body", "body": body, "more_body": True})

            def write_now(body: bytes) -> asyncio.Future[None] | None:
                return send_now(
                    frames_send, {"type": "http.response.body", "body": body, "more_body": True}
                )

            pump = asyncio.create_task(self.stream.pump(write, write_now))
            watch = asyncio.create_task(_wait_disconnect(receive))
            tasks = {pump, watch}
            drained: asyncio.Task[None] | None = None
            if self.drain is not None:
                self.drain.opened()
                drained = asyncio.create_task(self.drain.wait())
                tasks.add(drained)
            try:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                # Bounded: a pump stuck in a call that does not honour its
                # cancellation must not keep the response (and its stream
                # slot) alive after the client has gone.
                _, stuck = await asyncio.wait(tasks, timeout=CANCEL_GRACE_SECONDS)
                if stuck:
                    log.warning("stream %s: a task ignored cancellation", self.stream.stream_id)
                if self.drain is not None:
                    self.drain.closed()
            if drained is not None and drained in done and pump not in done and watch not in done:
                # Frames are written whole, so cutting the pump here leaves no
                # half event: the client resumes after the last id it got.
                assert self.drain is not None
                await send(
                    {"type": "http.response.body", "body": self.drain.goodbye(), "more_body": False}
                )
            elif pump in done and not pump.cancelled() and pump.exception() is None:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            elif pump in done and not isinstance(pump.exception(), OSError):
                log.error("stream %s failed: %r", self.stream.stream_id, pump.exception())
        finally:
            if counted:
                metrics.stream_closed()
            await self.stream.close()


async def _wait_disconnect(receive: Receive) -> None:
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return
