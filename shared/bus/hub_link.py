"""One pub/sub connection of the ``SubscriptionHub`` to one Redis server.

A link speaks RESP2 (pub/sub messages are plain arrays) on a connection of its
own, outside the client's pool, named ``spindle-hub-<pid>-<id>`` in ``CLIENT
LIST``. Commands (SUBSCRIBE, UNSUBSCRIBE, PING, or their sharded forms) go
through one FIFO writer and their replies are matched in order, so a channel
left and re-joined at once is never confirmed by the reply to an older command.

A standalone or Sentinel hub has one *persistent* link that reconnects after a
loss (through Sentinel: to whichever server is master then). A Redis Cluster
hub has one link per primary (opened at start, or when a subscription routes
to a node it has none for); such a link ends when its connection does, and the
hub routes later subscriptions by a fresh slot map (the node may have failed
over or given its slots away).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AskError, MovedError, RedisError, ResponseError

log = logging.getLogger(__name__)

# Why a (un)subscribe was not confirmed, or None once Redis confirmed it.
Confirmation = asyncio.Future[str | None]


def refusal_reason(error: ResponseError) -> str:
    """An error reply as Redis wrote it (redis-py drops the MOVED/ASK word)."""
    if isinstance(error, MovedError):
        return f"MOVED {error}"
    if isinstance(error, AskError):
        return f"ASK {error}"
    return str(error)


def is_redirect(reason: str) -> bool:
    """True when a refusal says the slot is served by another node."""
    return reason.startswith(("MOVED ", "ASK "))


class LinkOwner(Protocol):
    """What a link reports to its hub."""

    def link_message(self, link: HubLink, channel: bytes, payload: bytes) -> None: ...

    def link_connected(self, link: HubLink) -> None: ...

    def link_lost(self, link: HubLink, reason: str) -> None: ...

    def link_refused(self, link: HubLink, channel: bytes, reason: str) -> None: ...

    def link_dropped(self, link: HubLink, channel: bytes) -> None: ...


class HubLink:
    """A pub/sub connection to one server, reconnecting or not.

    Args:
        owner: the hub (receives messages and state changes).
        name: the server, ``host:port`` (``CLIENT LIST`` of that node shows it).
        new_connection: makes an unconnected connection to the server.
        sharded: SSUBSCRIBE/SUNSUBSCRIBE (Redis Cluster) instead of SUBSCRIBE.
        persistent: reconnect after a loss (standalone, Sentinel) or end.
        health_check_interval: idle seconds before a PING; no answer within
            another interval counts as a lost connection.
    """

    def __init__(
        self,
        owner: LinkOwner,
        name: str,
        new_connection: Callable[[], AbstractConnection],
        *,
        sharded: bool,
        persistent: bool,
        health_check_interval: float,
    ) -> None:
        self.owner = owner
        self.name = name
        self.sharded = sharded
        self.persistent = persistent
        self.health_check_interval = health_check_interval
        self.subscribe_command = b"SSUBSCRIBE" if sharded else b"SUBSCRIBE"
        self.unsubscribe_command = b"SUNSUBSCRIBE" if sharded else b"UNSUBSCRIBE"
        self._message = b"smessage" if sharded else b"message"
        self._dropped = b"sunsubscribe"
        self._new_connection = new_connection
        self._outbox: asyncio.Queue[tuple[bytes, ...]] = asyncio.Queue()
        # (reply kind, channel, confirmation) in the order sent on this connection
        self._awaiting: deque[tuple[bytes, bytes, Confirmation | None]] = deque()
        self.connected = asyncio.Event()
        self.ended: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.pongs = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"spindle-hub-link {self.name}")

    async def stop(self) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._end("subscription hub stopped")

    async def wait_connected(self) -> None:
        """Return once connected.

        Raises:
            ConnectionError: the link ended first (it will not connect).
        """
        if self.connected.is_set():
            return
        if self.ended.done():
            raise ConnectionError(self.ended.result())
        waiter = asyncio.ensure_future(self.connected.wait())
        either: set[asyncio.Future[Any]] = {waiter, self.ended}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not self.connected.is_set():
            raise ConnectionError(self.ended.result())

    def send(self, command: bytes, channel: bytes, confirm: Confirmation | None = None) -> None:
        """Queue a (un)subscribe; its reply is matched in order."""
        kind = command.lower()
        self._awaiting.append((kind, channel, confirm))
        self._outbox.put_nowait((command, channel))

    # -- the connection ----------------------------------------------------

    async def _run(self) -> None:
        backoff = 0.05
        reason = "Redis pub/sub connection lost"
        while True:
            connection = self._new_connection()
            try:
                await connection.connect()  # type: ignore[no-untyped-call]
            except (RedisError, OSError) as exc:
                reason = f"cannot connect to Redis {self.name}: {exc}"
                log.warning("subscription hub: %s", reason)
                await connection.disconnect(nowait=True)
                if not self.persistent:
                    break
                await asyncio.sleep(backoff)  # reconnect backoff, not a test wait
                backoff = min(backoff * 2, 2.0)
                continue
            backoff = 0.05
            self.connected.set()
            self.owner.link_connected(self)
            reason = "Redis pub/sub connection lost"
            try:
                await self._serve(connection)
            except (RedisError, OSError) as exc:
                reason = f"Redis pub/sub connection lost: {exc}"
                log.warning("subscription hub: %s (%s)", reason, self.name)
            except Exception as exc:  # a bug must not end live delivery for the process
                reason = f"Redis pub/sub connection lost: {exc!r}"
                log.exception("subscription hub: reader of %s failed", self.name)
            finally:
                if self._stopping:
                    reason = "subscription hub stopped"
                self.connected.clear()
                self._forget_replies(reason)
                self.owner.link_lost(self, reason)
                with contextlib.suppress(Exception):
                    await connection.disconnect(nowait=True)
            if not self.persistent:
                break
        self._end(reason)

    def _end(self, reason: str) -> None:
        self.connected.clear()
        self._forget_replies(reason)
        if not self.ended.done():
            self.ended.set_result(reason)

    def _forget_replies(self, reason: str) -> None:
        for _, _, confirm in self._awaiting:
            if confirm is not None and not confirm.done():
                confirm.set_result(reason)
        self._awaiting.clear()
        while not self._outbox.empty():
            self._outbox.get_nowait()

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
            try:
                reply = await connection.read_response(timeout=self.health_check_interval)
            except ResponseError as exc:  # e.g. MOVED: the slot is served elsewhere
                pinged = False
                self._refused(refusal_reason(exc))
                continue
            if reply is None:  # idle for a whole interval
                if pinged:
                    raise ConnectionError("no answer to PING")
                self._awaiting.append((b"ping", b"", None))
                self._outbox.put_nowait((b"PING",))
                pinged = True
                continue
            pinged = False
            if isinstance(reply, list) and reply:
                kind = reply[0]
                if kind == self._message:
                    self.owner.link_message(self, reply[1], reply[2])
                    continue
                self._reply(kind.lower(), reply[1] if len(reply) > 1 else b"")
            else:  # +PONG when nothing is subscribed
                self._reply(b"pong", b"")

    def _reply(self, kind: bytes, channel: bytes) -> None:
        expected = self._awaiting[0] if self._awaiting else None
        wanted = b"ping" if kind == b"pong" else kind
        if (
            expected is None
            or expected[0] != wanted
            or (kind != b"pong" and expected[1] != channel)
        ):
            if self.sharded and kind == self._dropped:
                # Redis unsubscribes shard channels of a slot the node gave away.
                self.owner.link_dropped(self, channel)
                return
            raise ConnectionError(f"pub/sub reply {kind!r} {channel!r} out of order")
        self._awaiting.popleft()
        if kind == b"pong":
            self.pongs += 1
        confirm = expected[2]
        if confirm is not None and not confirm.done():
            confirm.set_result(None)

    def _refused(self, reason: str) -> None:
        if not self._awaiting:
            raise ConnectionError(f"unexpected error reply: {reason}")
        _, channel, confirm = self._awaiting.popleft()
        if confirm is not None and not confirm.done():
            confirm.set_result(reason)
        self.owner.link_refused(self, channel, reason)


__all__ = ["Confirmation", "HubLink", "LinkOwner", "is_redirect", "refusal_reason"]
