"""The SSE stream of one run: backlog, then live messages, with no gap and no duplicate.

Order of operations (docs/design.md §9): subscribe to the run's live channel through the
process's shared ``SubscriptionHub`` FIRST, then read the backlog from the
store, send it, then forward live events, dropping every seq the backlog
already sent. Frames are written from the stored bytes (``id: <seq>`` then
``data: <compact JSON>``), never re-encoded. The response ends right after the
message that ends the conversation, and when the live feed breaks
(``SubscriptionLost``) so that the client resumes with ``Last-Event-ID``.
When the gateway process stops, ``StreamDrain`` ends every open stream at once
with a ``retry:`` hint (``spindle.gateway.streams.drain``), for the same resume elsewhere.

The response is a plain ASGI app rather than a ``StreamingResponse`` so that
headers are sent only once the subscription is confirmed (a client that sees
200 is live), and so that a client disconnect is noticed at once rather than
at the next write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from redis.exceptions import RedisError
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from spindle.gateway.http.problems import spindle_problem
from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.streams.drain import StreamDrain
from spindle.shared.bus.hub import Subscription, SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import LiveEvent, MessageBus, StoredMessage, stored_ts
from spindle.shared.contracts.errors import Unavailable
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.platform import metrics

log = logging.getLogger(__name__)

KEEPALIVE = b": keep-alive\n\n"
SSE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
    "Connection": "keep-alive",
}
# Backlog frames are sent in chunks of this many messages.
BACKLOG_CHUNK = 256
# How long a cancelled stream task may take to stop before the response ends anyway.
CANCEL_GRACE_SECONDS = 2.0

BacklogReader = Callable[[int, int | None], Awaitable[list[StoredMessage]]]


def frame(seq: int, raw: bytes) -> bytes:
    """One SSE event: ``id: <seq>`` and ``data: <stored JSON>`` (unnamed event)."""
    return b"id: %d\ndata: %s\n\n" % (seq, raw)


@dataclass(frozen=True)
class StreamCursor:
    """Where a client resumes.

    ``after_seq`` (from ``Last-Event-ID``) wins over ``since_ts`` (seed 002's
    ``since`` in epoch ms); ``live_only`` (``skipHistory`` with neither) sends
    only what is posted after the subscription.
    """

    after_seq: int | None = None
    since_ts: int | None = None
    live_only: bool = False


class RunEventStream:
    """Backlog + live events of one stream, as SSE frames.

    Args:
        stream_id: the run's stream (its workflow id).
        read_backlog: ``(after_seq, since_ts) -> stored messages`` (Redis, then archive).
        keepalive_seconds: idle time after which a comment line is sent.
        retry_ms: the reconnection delay hinted to EventSource clients.
        lease: the stream's slot of its tenant's stream limit: refreshed at
            least once per keep-alive interval while the stream is open (at each
            keep-alive, and after live frames when one is due, since a busy
            stream sends no keep-alives), released by ``close()``.
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
    ) -> None:
        self.stream_id = stream_id
        self._hub = hub
        self._bus = bus
        self._read_backlog = read_backlog
        self._cursor = cursor
        self._keepalive = keepalive_seconds
        self._retry_ms = retry_ms
        self._lease = lease
        self._lease_refreshed_at = time.monotonic()
        self._stack = contextlib.AsyncExitStack()
        self._sub: Subscription | None = None
        self._backlog: list[StoredMessage] = []
        self.last_sent = 0
        self.ended = False
        self._since: int | None = None

    async def open(self) -> None:
        """Subscribe, then read the backlog; after this nothing can be missed.

        Raises:
            SubscriptionLost: no confirmed subscription.
            RedisError: the store cannot be read.
        """
        self._sub = await self._stack.enter_async_context(self._hub.subscribe(self.stream_id))
        try:
            cursor = self._cursor
            if cursor.after_seq is not None:
                self.last_sent = cursor.after_seq
                self._backlog = await self._read_backlog(cursor.after_seq, None)
            elif cursor.since_ts is not None:
                # Everything up to this seq is either in the backlog read next
                # (ts > since) or older than the cursor; later seqs come live and
                # are still filtered by ts (see _wanted).
                self.last_sent = await self._bus.last_seq(self.stream_id)
                self._since = cursor.since_ts
                self._backlog = await self._read_backlog(0, cursor.since_ts)
                if self._backlog:
                    self.last_sent = min(self.last_sent, self._backlog[0].seq - 1)
            elif cursor.live_only:
                self.last_sent = await self._bus.last_seq(self.stream_id)
            else:
                self._backlog = await self._read_backlog(0, None)
            end = await self._bus.end_seq(self.stream_id)
            if end is None and self._backlog and _ends_conversation(self._backlog[-1].raw):
                end = self._backlog[-1].seq  # from the archive: Redis forgot the stream
            last_backlog = self._backlog[-1].seq if self._backlog else self.last_sent
            if end is not None and last_backlog >= end:
                # Nothing is posted after the end: send up to it and finish.
                self._backlog = [m for m in self._backlog if m.seq <= end]
                self.ended = True
        except BaseException:
            await self.close()
            raise

    @property
    def resumed(self) -> bool:
        """The client reconnected with a Last-Event-ID (header or query)."""
        return self._cursor.after_seq is not None

    @property
    def nothing_to_send(self) -> bool:
        """The conversation ended before this cursor: the stream would be empty."""
        return self.ended and not self._backlog

    async def close(self) -> None:
        """Leave the live channel and give the stream's slot back (idempotent)."""
        try:
            await self._stack.aclose()
        finally:
            if self._lease is not None:
                await self._lease.release()

    async def _refresh_lease(self, *, only_if_due: bool) -> None:
        if self._lease is None:
            return
        now = time.monotonic()
        if only_if_due and now - self._lease_refreshed_at < self._keepalive:
            return
        self._lease_refreshed_at = now
        await self._lease.refresh()

    async def pump(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        """Write the backlog, then live frames, until the conversation ends or
        the live feed breaks."""
        assert self._sub is not None, "open() first"
        head = b"retry: %d\n\n" % self._retry_ms
        backlog, self._backlog = self._backlog, []
        for start in range(0, len(backlog), BACKLOG_CHUNK):
            chunk = backlog[start : start + BACKLOG_CHUNK]
            await write(head + b"".join(frame(m.seq, m.raw) for m in chunk))
            metrics.messages_delivered(len(chunk))
            head = b""
            self.last_sent = chunk[-1].seq
        if head:
            await write(head)
        if self.ended:
            return
        while True:
            try:
                # Not asyncio.wait_for: on 3.11 it can swallow a cancellation that
                # lands as the inner get() completes, and the stream never stops.
                async with asyncio.timeout(self._keepalive):
                    first = await self._sub.get()
            except TimeoutError:
                await write(KEEPALIVE)
                await self._refresh_lease(only_if_due=False)
                continue
            except SubscriptionLost as exc:
                log.info("stream %s: live feed lost (%s); client will resume", self.stream_id, exc)
                return
            events = [first]
            with contextlib.suppress(SubscriptionLost):
                while (more := self._sub.get_nowait()) is not None:
                    events.append(more)
            out = await self._frames(events)
            if out:
                await write(b"".join(out))
                metrics.messages_delivered(len(out))
            if self.ended:
                return
            await self._refresh_lease(only_if_due=True)

    async def _frames(self, events: list[LiveEvent]) -> list[bytes]:
        out: list[bytes] = []
        for event in events:
            if event.seq <= self.last_sent:
                continue  # the backlog (or a gap fill) already sent it
            if event.seq > self.last_sent + 1:
                # Never expected (subscribe-first leaves no gap), but if it
                # happens read what is missing rather than skip it.
                for m in await self._read_backlog(self.last_sent, None):
                    if m.seq > event.seq:
                        break
                    if self._wanted(m.raw):
                        out.append(frame(m.seq, m.raw))
                    self.last_sent = m.seq
                if self.last_sent >= event.seq:
                    self.ended = self.ended or event.ends
                    if self.ended:
                        break
                    continue
            if self._wanted(event.raw):
                out.append(frame(event.seq, event.raw))
            self.last_sent = event.seq
            if event.ends:
                self.ended = True
                break
        return out

    def _wanted(self, raw: bytes) -> bool:
        """With a ``since`` cursor only messages newer than it are sent."""
        return self._since is None or stored_ts(raw) > self._since


def _ends_conversation(raw: bytes) -> bool:
    try:
        return CompactMessage.model_validate_json(raw).ends_conversation
    except ValueError:
        return False


class EventStreamResponse(Response):
    """ASGI response for a ``RunEventStream``.

    Sends headers only after ``open()`` succeeded (503 problem otherwise, 204
    when the run ended before the client's cursor so EventSource stops
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
        counted = False
        try:
            if self.stream.nothing_to_send:
                await send({"type": "http.response.start", "status": 204, "headers": []})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            metrics.stream_opened(resumed=self.stream.resumed)
            counted = True

            async def write(body: bytes) -> None:
                await send({"type": "http.response.body", "body": body, "more_body": True})

            pump = asyncio.create_task(self.stream.pump(write))
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
