"""One shared Redis pub/sub connection per process, fanned out to subscribers.

docs/design.md §9: a Redis subscription per SSE client costs ~5x the CPU, a connection
per viewer, and loses what is published between connect and SUBSCRIBE. So a
process keeps ONE pub/sub connection; every subscriber gets a bounded in-memory
queue fed by a single reader task with ``put_nowait`` (a slow consumer never
holds up the others: it overflows and is told to resume from the backlog). A
subscriber that waits with an empty queue may take the event itself instead
(``Subscription.taker``: an SSE stream writes its frame there and then).

Usage (the SSE route)::

    async with hub.subscribe(stream_id) as sub:   # returns once Redis confirmed
        backlog = await bus.history(stream_id, after_seq=last_event_id)
        ...send backlog, remember the last seq sent...
        while True:
            event = await sub.get()               # SubscriptionLost → end response
            if event.seq <= last_sent: continue   # the backlog already had it
            ...

The connection (``spindle.shared.bus.hub_link``) speaks RESP2, is named
``spindle-hub-<pid>-<id>`` in ``CLIENT LIST`` and is not part of the client's
pool. On a Redis Cluster the hub uses sharded pub/sub: one connection per
primary that owns a subscribed channel's slot (still one per node and process,
shared by every subscriber), SSUBSCRIBE routed by the client's slot map. A
MOVED reply refreshes the map and the subscribe is retried on the new owner;
a channel whose slot migrates away (Redis sends an unasked SUNSUBSCRIBE) or
whose node is lost is lost like any broken feed, and its consumers re-subscribe
and resume from the backlog by seq. (redis-py 8.1's asyncio ``ClusterPubSub``
also shards SSUBSCRIBE over node connections, but reads them by polling each in
turn with a timeout and has no confirm-before-return; the hub keeps a reader
task per node connection and its in-order reply matching instead.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from spindle.shared.bus.hub_link import Confirmation, HubLink, is_redirect
from spindle.shared.bus.message_bus import LiveEvent, live_channel, parse_live_payload
from spindle.shared.bus.subscription import Subscription, SubscriptionLost
from spindle.shared.platform.redis_connect import RedisClient

log = logging.getLogger(__name__)

SUBSCRIBE_ATTEMPTS = 3  # a MOVED reply sends the subscribe to the new owner


@dataclass(eq=False)
class _Channel:
    name: bytes
    link: HubLink
    confirmed: Confirmation  # None: Redis confirmed; a reason: it did not
    subs: set[Subscription] = field(default_factory=set)


class SubscriptionHub:
    """Shares one Redis pub/sub connection (per node) among all subscribers of a process.

    Args:
        redis: the client whose connection settings the hub's own connections
            copy: one server, a Sentinel master, or a Redis Cluster (sharded).
        queue_size: events a subscriber may have queued before it is dropped.
        confirm_timeout: how long ``subscribe`` waits for the connection and for
            Redis to confirm the SUBSCRIBE.
        health_check_interval: after this many idle seconds the hub PINGs; no
            answer within another interval counts as a lost connection.
    """

    def __init__(
        self,
        redis: RedisClient,
        *,
        queue_size: int = 10_000,
        confirm_timeout: float = 5.0,
        health_check_interval: float = 15.0,
    ) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self._redis = redis
        self.sharded = isinstance(redis, RedisCluster)
        self.queue_size = queue_size
        self.confirm_timeout = confirm_timeout
        self.health_check_interval = health_check_interval
        self.client_name = f"spindle-hub-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._channels: dict[bytes, _Channel] = {}
        self._links: dict[str, HubLink] = {}
        self._started = False
        self._ever_connected: set[str] = set()
        self._reconnects = 0
        self._redirects = 0
        self._delivered = 0
        self._lost_subscriptions = 0
        self._pongs_of_ended_links = 0
        self._refreshing: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------

    async def start(self) -> None:
        """Start the hub; waits up to ``confirm_timeout`` for its connection (on a
        cluster: one per primary). If Redis is down it keeps retrying (on a
        cluster: at the next subscribe)."""
        if self._started:
            return
        self._started = True
        with contextlib.suppress(TimeoutError, ConnectionError, RedisError, OSError):
            async with asyncio.timeout(self.confirm_timeout):
                if not self.sharded:
                    link = self._new_link("server", self._server_connection, persistent=True)
                    await link.wait_connected()
                    return
                await self._cluster.initialize()
                links = [self._link_to(node) for node in self._cluster.get_primaries()]
                await asyncio.gather(*(link.wait_connected() for link in links))

    async def stop(self) -> None:
        """Close the connections; every live subscription is lost."""
        self._started = False
        refreshing, self._refreshing = self._refreshing, None
        if refreshing is not None:
            refreshing.cancel()
        links = list(self._links.values())
        self._links.clear()
        await asyncio.gather(*(link.stop() for link in links), return_exceptions=True)
        self._pongs_of_ended_links += sum(link.pongs for link in links)
        for channel in list(self._channels.values()):
            self._fail_channel(channel, "subscription hub stopped")

    @property
    def connected(self) -> bool:
        """True while a pub/sub connection is up (on a cluster: every node link)."""
        links = list(self._links.values())
        return bool(links) and all(link.connected.is_set() for link in links)

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: channels, subscribers, events delivered, reconnects."""
        return {
            "connected": self.connected,
            "connections": sum(1 for link in self._links.values() if link.connected.is_set()),
            "channels": len(self._channels),
            "subscribers": sum(len(ch.subs) for ch in self._channels.values()),
            "delivered": self._delivered,
            "lost_subscriptions": self._lost_subscriptions,
            "reconnects": self._reconnects,
            "redirects": self._redirects,  # MOVED/ASK answers to a (cluster) subscribe
            "health_checks": self._pongs_of_ended_links
            + sum(link.pongs for link in self._links.values()),
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
        if not self._started:
            raise RuntimeError("SubscriptionHub.start() has not been called")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.confirm_timeout
        name = live_channel(stream_id).encode()
        reason = "no Redis pub/sub connection"
        for _ in range(SUBSCRIBE_ATTEMPTS):
            try:
                async with asyncio.timeout_at(deadline):
                    link = await self._link_for(name)
                    await link.wait_connected()
            except (TimeoutError, RedisError, OSError):
                raise SubscriptionLost("no Redis pub/sub connection") from None
            sub = Subscription(stream_id, self.queue_size)
            channel = self._channels.get(name)
            if channel is None:
                channel = _Channel(name, link, loop.create_future())
                self._channels[name] = channel
                link.send(link.subscribe_command, name, channel.confirmed)
            channel.subs.add(sub)
            sub._channel = channel
            try:
                async with asyncio.timeout_at(deadline):
                    refusal = await asyncio.shield(channel.confirmed)
            except TimeoutError:
                self._release(sub)
                raise SubscriptionLost("Redis did not confirm SUBSCRIBE in time") from None
            except BaseException:
                self._release(sub)
                raise
            if refusal is None and sub.lost is None:
                return sub
            reason = sub.lost or refusal or "connection lost before SUBSCRIBE was confirmed"
            self._release(sub)
            if not self.sharded or not is_redirect(reason):
                break
            with contextlib.suppress(TimeoutError, RedisError, OSError):
                async with asyncio.timeout_at(deadline):
                    await self._refresh_slots()
        raise SubscriptionLost(reason)

    def _release(self, sub: Subscription) -> None:
        channel: _Channel | None = sub._channel
        sub._channel = None
        if channel is None:
            return
        channel.subs.discard(sub)
        if not channel.subs and self._channels.get(channel.name) is channel:
            del self._channels[channel.name]
            # In command order after the SUBSCRIBE, confirmed or not yet.
            if channel.link.connected.is_set():
                channel.link.send(channel.link.unsubscribe_command, channel.name)

    # -- links (connections) -----------------------------------------------

    @property
    def _cluster(self) -> RedisCluster:
        assert isinstance(self._redis, RedisCluster)
        return self._redis

    def _new_link(self, name: str, new_connection: Any, *, persistent: bool) -> HubLink:
        link = HubLink(
            self,
            name,
            new_connection,
            sharded=self.sharded,
            persistent=persistent,
            health_check_interval=self.health_check_interval,
        )
        self._links[name] = link
        link.start()
        return link

    async def _link_for(self, channel: bytes) -> HubLink:
        if not self.sharded:
            return self._links["server"]
        cluster = self._cluster
        await cluster.initialize()  # once; later calls return at once
        if self._refreshing is not None and not self._refreshing.done():
            await asyncio.shield(self._refreshing)  # route by the map being read now
        return self._link_to(cluster.nodes_manager.get_node_from_slot(cluster.keyslot(channel)))

    def _link_to(self, node: ClusterNode) -> HubLink:
        link = self._links.get(node.name)
        if link is None or link.ended.done():
            link = self._new_link(node.name, lambda: self._node_connection(node), persistent=False)
        return link

    def _connection_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        kwargs = {
            **kwargs,
            "protocol": 2,  # pub/sub messages as plain arrays
            "socket_timeout": None,  # idle is normal here; health checks detect dead peers
            "health_check_interval": 0,  # our PINGs, not redis-py's (it would read our replies)
            "client_name": self.client_name,
        }
        kwargs.pop("maint_notifications_config", None)
        return kwargs

    def _server_connection(self) -> AbstractConnection:
        assert not isinstance(self._redis, RedisCluster)
        pool = self._redis.connection_pool
        connection: AbstractConnection = pool.connection_class(
            **self._connection_kwargs(pool.connection_kwargs)
        )
        return connection

    def _node_connection(self, node: ClusterNode) -> AbstractConnection:
        connection: AbstractConnection = node.connection_class(
            **self._connection_kwargs(node.connection_kwargs)
        )
        return connection

    async def _refresh_slots(self) -> None:
        """Re-read the cluster's slot map (one refresh at a time)."""
        await asyncio.shield(self._start_refresh())

    def _start_refresh(self) -> asyncio.Task[None]:
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._cluster.nodes_manager.initialize())
            self._refreshing.add_done_callback(_log_refresh_failure)
        return self._refreshing

    def _refresh_soon(self) -> None:
        """Start re-reading the slot map now; subscribes route by it once read."""
        if self.sharded and self._started:
            self._start_refresh()

    # -- what links report (LinkOwner) -----------------------------------------

    def link_connected(self, link: HubLink) -> None:
        if link.name in self._ever_connected:
            self._reconnects += 1
        self._ever_connected.add(link.name)

    def link_lost(self, link: HubLink, reason: str) -> None:
        for channel in [ch for ch in self._channels.values() if ch.link is link]:
            self._fail_channel(channel, reason)
        if not link.persistent:
            if self._links.get(link.name) is link:
                del self._links[link.name]
                self._pongs_of_ended_links += link.pongs
            self._refresh_soon()  # the node may have failed over

    def link_refused(self, link: HubLink, channel_name: bytes, reason: str) -> None:
        log.info("subscription hub: %s refused %r: %s", link.name, channel_name, reason)
        channel = self._channels.get(channel_name)
        if channel is not None and channel.link is link:
            self._fail_channel(channel, reason)
        if is_redirect(reason):
            self._redirects += 1
            self._refresh_soon()

    def link_dropped(self, link: HubLink, channel_name: bytes) -> None:
        channel = self._channels.get(channel_name)
        if channel is not None and channel.link is link:
            self._fail_channel(channel, f"the slot of {channel_name!r} moved off Redis {link.name}")
        self._refresh_soon()

    def link_message(self, link: HubLink, name: bytes, payload: bytes) -> None:
        channel = self._channels.get(name)
        if channel is None or channel.link is not link or not channel.confirmed.done():
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

    def _fail_channel(self, channel: _Channel, reason: str) -> None:
        if self._channels.get(channel.name) is channel:
            del self._channels[channel.name]
        if not channel.confirmed.done():
            channel.confirmed.set_result(reason)
        for sub in channel.subs:
            if sub.lost is None:
                self._lost_subscriptions += 1
            sub._lose(reason)


def _log_refresh_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("subscription hub: cannot refresh the cluster slot map: %s", task.exception())


__all__ = ["LiveEvent", "Subscription", "SubscriptionHub", "SubscriptionLost"]
