"""One shared Redis pub/sub connection per process, fanned out to subscribers.

DESIGN §9: a Redis subscription per SSE client costs ~5x the CPU, a connection
per viewer, and loses what is published between connect and SUBSCRIBE. So a
process keeps ONE pub/sub connection; every subscriber gets a bounded in-memory
queue fed by a single reader task with ``put_nowait`` (a slow consumer never
holds up the others: it overflows and is told to resume from the backlog).

Usage (the SSE route)::

    async with hub.subscribe(stream_id) as sub:   # returns once Redis confirmed
        backlog = await bus.history(stream_id, after_seq=last_event_id)
        ...send backlog, remember the last seq sent...
        while True:
            event = await sub.get()               # SubscriptionLost → end response
            if event.seq <= last_sent: continue   # the backlog already had it
            ...

The connection speaks RESP2 (pub/sub messages are plain arrays), is named
``spindle-hub-<pid>-<id>`` in ``CLIENT LIST``, and is not part of the client's
pool. Commands on it (SUBSCRIBE, UNSUBSCRIBE, PING) go through one FIFO writer,
and their replies are matched in order, so a channel left and re-joined at once
is never confirmed by the reply to an older command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from shared.bus import LiveEvent, live_channel, parse_live_payload

log = logging.getLogger(__name__)

_SUBSCRIBE = b"subscribe"
_UNSUBSCRIBE = b"unsubscribe"
_MESSAGE = b"message"


class SubscriptionLost(Exception):
    """The live feed of a subscription broke (connection dropped, queue overflowed,
    hub stopped). Nothing more will arrive: resume from the backlog by seq."""


class Subscription:
    """One subscriber's view of a stream's live channel (a single consumer task)."""

    def __init__(self, stream_id: str, maxsize: int) -> None:
        self.stream_id = stream_id
        self._events: deque[LiveEvent] = deque()
        self._maxsize = maxsize
        self._waiter: asyncio.Future[None] | None = None
        self._lost: str | None = None
        self._channel: _Channel | None = None

    @property
    def lost(self) -> str | None:
        """Why the subscription was lost, or None while it is live."""
        return self._lost

    def pending(self) -> int:
        """Events received and not yet taken."""
        return len(self._events)

    async def get(self) -> LiveEvent:
        """The next live event, in publish order.

        Raises:
            SubscriptionLost: the feed broke; events may have been missed.
        """
        while not self._events:
            if self._lost is not None:
                raise SubscriptionLost(self._lost)
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._lost is not None:
            raise SubscriptionLost(self._lost)
        return self._events.popleft()

    def get_nowait(self) -> LiveEvent | None:
        """The next event if one is queued, else None.

        Raises:
            SubscriptionLost: the feed broke.
        """
        if self._lost is not None:
            raise SubscriptionLost(self._lost)
        return self._events.popleft() if self._events else None

    def __aiter__(self) -> AsyncIterator[LiveEvent]:
        return self

    async def __anext__(self) -> LiveEvent:
        return await self.get()

    def _deliver(self, event: LiveEvent) -> bool:
        if self._lost is not None:
            return False
        if len(self._events) >= self._maxsize:
            self._lose(f"live queue overflowed ({self._maxsize} events): consumer too slow")
            return False
        self._events.append(event)
        self._wake()
        return True

    def _lose(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            self._events.clear()
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


@dataclass(eq=False)
class _Channel:
    name: bytes
    confirmed: asyncio.Future[bool]  # True: Redis confirmed; False: lost first
    subs: set[Subscription] = field(default_factory=set)


class SubscriptionHub:
    """Shares one Redis pub/sub connection among all subscribers of a process.

    Args:
        redis: the client whose connection settings the hub's own connection copies.
        queue_size: events a subscriber may have queued before it is dropped.
        confirm_timeout: how long ``subscribe`` waits for the connection and for
            Redis to confirm the SUBSCRIBE.
        health_check_interval: after this many idle seconds the hub PINGs; no
            answer within another interval counts as a lost connection.
    """

    def __init__(
        self,
        redis: aioredis.Redis,
        *,
        queue_size: int = 10_000,
        confirm_timeout: float = 5.0,
        health_check_interval: float = 15.0,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self._redis = redis
        self.queue_size = queue_size
        self.confirm_timeout = confirm_timeout
        self.health_check_interval = health_check_interval
        self.client_name = f"spindle-hub-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._channels: dict[bytes, _Channel] = {}
        self._outbox: asyncio.Queue[tuple[bytes, ...]] = asyncio.Queue()
        # (command, channel, future-to-confirm) in the order sent on this connection
        self._awaiting_reply: deque[tuple[bytes, bytes, asyncio.Future[bool] | None]] = deque()
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._connects = 0
        self._delivered = 0
        self._lost_subscriptions = 0
        self._pongs = 0

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Start the reader; waits up to ``confirm_timeout`` for the first connection
        (if Redis is down it keeps retrying in the background)."""
        if self._task is not None:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="spindle-subscription-hub")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._connected.wait(), self.confirm_timeout)

    async def stop(self) -> None:
        """Close the connection; every live subscription is lost."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fail_all("subscription hub stopped")

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: channels, subscribers, events delivered, reconnects."""
        return {
            "connected": self.connected,
            "connections": 1 if self.connected else 0,
            "channels": len(self._channels),
            "subscribers": sum(len(ch.subs) for ch in self._channels.values()),
            "delivered": self._delivered,
            "lost_subscriptions": self._lost_subscriptions,
            "reconnects": max(0, self._connects - 1),
            "health_checks": self._pongs,
        }

    # -- subscribing -------------------------------------------------------

    @contextlib.asynccontextmanager
    async def subscribe(self, stream_id: str) -> AsyncIterator[Subscription]:
        """Subscribe to a stream's live channel.

        Entry returns only after Redis has confirmed the SUBSCRIBE, so what the
        caller reads from the backlog next plus what arrives here covers every
        message (drop duplicates by seq).

        Raises:
            SubscriptionLost: no connection, or no confirmation within ``confirm_timeout``.
        """
        sub = await self._open(stream_id)
        try:
            yield sub
        finally:
            self._release(sub)

    async def _open(self, stream_id: str) -> Subscription:
        if self._task is None or self._stopping:
            raise RuntimeError("SubscriptionHub.start() has not been called")
        try:
            await asyncio.wait_for(self._connected.wait(), self.confirm_timeout)
        except TimeoutError:
            raise SubscriptionLost("no Redis pub/sub connection") from None
        name = live_channel(stream_id).encode()
        sub = Subscription(stream_id, self.queue_size)
        channel = self._channels.get(name)
        if channel is None:
            channel = _Channel(name, asyncio.get_running_loop().create_future())
            self._channels[name] = channel
            self._send(b"SUBSCRIBE", name, confirm=channel.confirmed)
        channel.subs.add(sub)
        sub._channel = channel
        try:
            ok = await asyncio.wait_for(asyncio.shield(channel.confirmed), self.confirm_timeout)
        except TimeoutError:
            self._release(sub)
            raise SubscriptionLost("Redis did not confirm SUBSCRIBE in time") from None
        except BaseException:
            self._release(sub)
            raise
        if not ok:
            self._release(sub)
            raise SubscriptionLost(sub.lost or "connection lost before SUBSCRIBE was confirmed")
        return sub

    def _release(self, sub: Subscription) -> None:
        channel, sub._channel = sub._channel, None
        if channel is None:
            return
        channel.subs.discard(sub)
        if not channel.subs and self._channels.get(channel.name) is channel:
            del self._channels[channel.name]
            if self.connected:
                self._send(b"UNSUBSCRIBE", channel.name)

    def _send(
        self, command: bytes, channel: bytes, confirm: asyncio.Future[bool] | None = None
    ) -> None:
        # Queued and matched in the same order: replies arrive in command order.
        self._awaiting_reply.append((command.lower(), channel, confirm))
        self._outbox.put_nowait((command, channel))

    # -- the connection ----------------------------------------------------

    def _new_connection(self) -> AbstractConnection:
        pool = self._redis.connection_pool
        kwargs = {
            **pool.connection_kwargs,
            "protocol": 2,  # pub/sub messages as plain arrays
            "socket_timeout": None,  # idle is normal here; health checks detect dead peers
            "health_check_interval": 0,  # our PINGs, not redis-py's (it would read our replies)
            "client_name": self.client_name,
        }
        kwargs.pop("maint_notifications_config", None)
        connection: AbstractConnection = pool.connection_class(**kwargs)
        return connection

    async def _run(self) -> None:
        backoff = 0.05
        while not self._stopping:
            connection = self._new_connection()
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
            except (RedisError, OSError) as exc:
                log.warning("subscription hub: cannot connect to Redis: %s", exc)
                await connection.disconnect(nowait=True)
                await asyncio.sleep(backoff)  # reconnect backoff, not a test wait
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            self._connects += 1
            self._connected.set()
            reason = "Redis pub/sub connection lost"
            try:
                await self._serve(connection)
            except (RedisError, OSError) as exc:
                reason = f"Redis pub/sub connection lost: {exc}"
                log.warning("subscription hub: %s", reason)
            except Exception as exc:  # a bug must not end live delivery for the process
                reason = f"Redis pub/sub connection lost: {exc!r}"
                log.exception("subscription hub: reader failed; reconnecting")
            finally:
                self._connected.clear()
                self._fail_all("subscription hub stopped" if self._stopping else reason)
                with contextlib.suppress(Exception):
                    await connection.disconnect(nowait=True)

    async def _serve(self, connection: AbstractConnection) -> None:
        reader = asyncio.create_task(self._read(connection))
        writer = asyncio.create_task(self._write(connection))
        try:
            done, _ = await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raise the failure
            raise ConnectionError("pub/sub connection closed")
        finally:
            for task in (reader, writer):
                task.cancel()
            await asyncio.gather(reader, writer, return_exceptions=True)

    async def _write(self, connection: AbstractConnection) -> None:
        while True:
            command = await self._outbox.get()
            await connection.send_command(*command, check_health=False)

    async def _read(self, connection: AbstractConnection) -> None:
        pinged = False
        while True:
            reply = await connection.read_response(timeout=self.health_check_interval)
            if reply is None:  # idle for a whole interval
                if pinged:
                    raise ConnectionError("no answer to PING")
                self._awaiting_reply.append((b"ping", b"", None))
                self._outbox.put_nowait((b"PING",))
                pinged = True
                continue
            pinged = False
            if isinstance(reply, list) and reply:
                kind = reply[0]
                if kind == _MESSAGE:
                    self._dispatch(reply[1], reply[2])
                    continue
                self._reply(kind.lower(), reply[1] if len(reply) > 1 else b"")
            else:  # +PONG when nothing is subscribed
                self._reply(b"pong", b"")

    def _reply(self, kind: bytes, channel: bytes) -> None:
        if not self._awaiting_reply:
            log.warning("subscription hub: unexpected reply %r %r", kind, channel)
            return
        command, expected, confirm = self._awaiting_reply.popleft()
        if command != (b"ping" if kind == b"pong" else kind) or (
            kind != b"pong" and expected != channel
        ):
            raise ConnectionError(f"pub/sub reply {kind!r} {channel!r} out of order")
        if kind == b"pong":
            self._pongs += 1
        if confirm is not None and not confirm.done():
            confirm.set_result(True)

    def _dispatch(self, name: bytes, payload: bytes) -> None:
        channel = self._channels.get(name)
        if channel is None or not channel.confirmed.done():
            return  # left, or a re-join not yet confirmed (the backlog covers it)
        try:
            event = parse_live_payload(payload)
        except ValueError:
            log.warning("subscription hub: ignoring malformed payload on %r", name)
            return
        for sub in channel.subs:
            if sub.lost is not None:
                continue  # overflowed: stays registered until it leaves, gets nothing
            if sub._deliver(event):
                self._delivered += 1
            else:
                self._lost_subscriptions += 1

    def _fail_all(self, reason: str) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        for channel in channels:
            if not channel.confirmed.done():
                channel.confirmed.set_result(False)
            for sub in channel.subs:
                if sub.lost is None:
                    self._lost_subscriptions += 1
                sub._lose(reason)
        for _, _, confirm in self._awaiting_reply:
            if confirm is not None and not confirm.done():
                confirm.set_result(False)
        self._awaiting_reply.clear()
        while not self._outbox.empty():
            self._outbox.get_nowait()


__all__ = ["LiveEvent", "Subscription", "SubscriptionHub", "SubscriptionLost"]
