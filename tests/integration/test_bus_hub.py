"""The shared subscription hub against a real Redis: ordering, the
subscribe-then-backlog pattern under a concurrent publisher, refcounting,
overflow, connection loss, and one connection for many subscribers. Each test
that uses Redis runs on a single server and on a three-master Redis Cluster
(sharded pub/sub, one connection per node)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis
from redis.crc import key_slot

from spindle.shared.bus.hub import Subscription, SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import MessageBus, live_channel
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from spindle.shared.platform.redis_connect import RedisClient
from tests.integration.conftest import eventually
from tests.integration.redis_topologies import RedisTopology, move_slot

pytestmark = [pytest.mark.integration, pytest.mark.redis_topologies]

T = AgentMessageType


def update(text: str) -> CompactMessage:
    return CompactMessage(t=T.UPDATE, m=text)


async def next_event_seq(sub: Subscription) -> int:
    return (await asyncio.wait_for(sub.get(), 5)).seq


async def numsub(topology: RedisTopology, stream_id: str) -> int:
    return await topology.numsub(live_channel(stream_id))


async def hub_clients(
    topology: RedisTopology, hub: SubscriptionHub, stream_id: str
) -> list[dict[str, str]]:
    """The hub's connections on the node that serves the stream's channel."""
    return await topology.clients_named(live_channel(stream_id), hub.client_name)


@contextlib.asynccontextmanager
async def own_hub(
    redis_factory: Callable[[], RedisClient], **kwargs: float
) -> AsyncIterator[SubscriptionHub]:
    client = redis_factory()
    hub = SubscriptionHub(client, **kwargs)  # type: ignore[arg-type]
    await hub.start()
    try:
        yield hub
    finally:
        await hub.stop()
        await client.aclose()


async def test_subscriber_receives_live_events_in_order(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    async with hub.subscribe(stream_id) as sub:
        posted = await bus.post_many(stream_id, [(update(f"m{i}"), None) for i in range(50)])
        posted.append(await bus.post(stream_id, CompactMessage(t=T.COMPLETE)))
        events = [await asyncio.wait_for(sub.get(), 5) for _ in range(51)]

    assert [e.seq for e in events] == list(range(1, 52))
    assert [e.raw for e in events] == [p.raw for p in posted]
    assert [e.raw for e in events] == [m.raw for m in await bus.history(stream_id)]
    assert [e.ends for e in events] == [False] * 50 + [True]


async def test_subscribe_then_backlog_loses_and_duplicates_nothing(
    hub: SubscriptionHub, redis_factory: Callable[[], RedisClient], stream_id: str
) -> None:
    total = 500
    join_at = [1, 100, 250, 400, 499]
    reached = {n: asyncio.Event() for n in join_at}
    publisher_bus = MessageBus(redis_factory())

    async def publish() -> None:
        for i in range(1, total + 1):
            await publisher_bus.post(stream_id, update(f"m{i}"))
            if i in reached:
                reached[i].set()

    async def watch(join: int) -> tuple[list[int], int, int]:
        await reached[join].wait()
        async with hub.subscribe(stream_id) as sub:
            backlog = await publisher_bus.history(stream_id)
            seqs = [m.seq for m in backlog]
            last = seqs[-1]
            live = dropped = 0
            while last < total:
                event = await asyncio.wait_for(sub.get(), 10)
                if event.seq <= last:
                    dropped += 1  # published between SUBSCRIBE and the backlog read
                    continue
                assert event.seq == last + 1, f"gap after {last}: got {event.seq}"
                seqs.append(event.seq)
                last = event.seq
                live += 1
        return seqs, live, dropped

    try:
        publisher = asyncio.create_task(publish())
        results = await asyncio.gather(*(watch(n) for n in join_at))
        await publisher
    finally:
        await publisher_bus.close()

    for join, (seqs, live, _dropped) in zip(join_at, results, strict=True):
        assert seqs == list(range(1, total + 1)), f"subscriber joining at {join}"
        print(f"joined at {join}: {total - live} from backlog, {live} live, {_dropped} dropped")
    # The early joiners must have got most of the stream live, not from the backlog.
    assert results[0][1] > total // 2


async def test_last_subscriber_leaving_unsubscribes(
    hub: SubscriptionHub, bus: MessageBus, redis_topology: RedisTopology, stream_id: str
) -> None:
    before = hub.stats()["channels"]
    async with hub.subscribe(stream_id) as first:
        async with hub.subscribe(stream_id) as second:
            assert hub.stats()["channels"] == before + 1
            assert await numsub(redis_topology, stream_id) == 1  # one Redis subscription for two
            await bus.post(stream_id, update("to both"))
            assert await next_event_seq(first) == 1
            assert await next_event_seq(second) == 1
        # `first` is still subscribed and still receives.
        await bus.post(stream_id, update("to first"))
        assert await next_event_seq(first) == 2
        assert await numsub(redis_topology, stream_id) == 1
    assert hub.stats()["channels"] == before

    # Replies come in command order: once a later SUBSCRIBE on the same connection
    # is confirmed, Redis has processed the UNSUBSCRIBE sent before it. (On a
    # cluster the other channel must be served by the same node.)
    node = redis_topology.port_of(live_channel(stream_id))
    other = next(
        f"{stream_id}-other-{i}"
        for i in range(1000)
        if redis_topology.port_of(live_channel(f"{stream_id}-other-{i}")) == node
    )
    async with hub.subscribe(other):
        assert await numsub(redis_topology, stream_id) == 0


async def test_rejoining_right_after_leaving_gets_a_confirmed_subscription(
    hub: SubscriptionHub, bus: MessageBus, stream_id: str
) -> None:
    for round_ in range(1, 6):
        async with hub.subscribe(stream_id) as sub:
            await bus.post(stream_id, update(f"round {round_}"))
            assert await next_event_seq(sub) == round_


async def test_overflowing_subscriber_is_lost_and_others_carry_on(
    redis_factory: Callable[[], RedisClient], bus: MessageBus, stream_id: str
) -> None:
    marker_stream = stream_id + "-marker"
    async with (
        own_hub(redis_factory, queue_size=5) as small_hub,
        small_hub.subscribe(stream_id) as slow,
        small_hub.subscribe(marker_stream) as marker,
    ):
        await bus.post_many(stream_id, [(update(str(i)), None) for i in range(10)])
        await bus.post(marker_stream, update("after the burst"))
        # One connection, delivered in publish order: the burst was dispatched.
        assert await next_event_seq(marker) == 1

        assert slow.lost is not None
        with pytest.raises(SubscriptionLost, match="overflow"):
            await slow.get()
        assert small_hub.stats()["lost_subscriptions"] == 1

        await bus.post(marker_stream, update("still live"))
        assert await next_event_seq(marker) == 2


async def test_connection_loss_loses_subscriptions_and_the_hub_reconnects(
    redis_factory: Callable[[], RedisClient],
    bus: MessageBus,
    redis_topology: RedisTopology,
    stream_id: str,
) -> None:
    channel = live_channel(stream_id)
    async with own_hub(redis_factory) as own:
        async with own.subscribe(stream_id) as sub:
            await bus.post(stream_id, update("before"))
            assert await next_event_seq(sub) == 1

            (connection,) = await hub_clients(redis_topology, own, stream_id)
            await redis_topology.kill_client(channel, connection["id"])

            with pytest.raises(SubscriptionLost, match="connection lost"):
                await asyncio.wait_for(sub.get(), 5)

        # New subscribers get a fresh connection (entry waits for it).
        async with own.subscribe(stream_id) as again:
            await bus.post(stream_id, update("after"))
            assert await next_event_seq(again) == 2
        assert own.stats()["reconnects"] == 1
        assert len(await hub_clients(redis_topology, own, stream_id)) == 1


async def test_stopping_the_hub_loses_live_subscriptions(
    redis_factory: Callable[[], RedisClient], stream_id: str
) -> None:
    client = redis_factory()
    own = SubscriptionHub(client)
    with pytest.raises(RuntimeError):
        async with own.subscribe(stream_id):
            pass
    await own.start()
    try:
        async with own.subscribe(stream_id) as sub:
            waiting = asyncio.create_task(sub.get())
            await own.stop()
            with pytest.raises(SubscriptionLost, match="stopped"):
                await asyncio.wait_for(waiting, 5)
    finally:
        await own.stop()
        await client.aclose()


async def test_100_subscribers_share_one_pubsub_connection(
    hub: SubscriptionHub, bus: MessageBus, redis_topology: RedisTopology, stream_id: str
) -> None:
    before = hub.stats()
    async with contextlib.AsyncExitStack() as stack:
        subs = await asyncio.gather(
            *(stack.enter_async_context(hub.subscribe(stream_id)) for _ in range(100))
        )
        stats = hub.stats()
        assert stats["subscribers"] - before["subscribers"] == 100
        assert stats["channels"] - before["channels"] == 1
        # One connection per process, or per node on a cluster (its primaries).
        assert stats["connections"] == len(redis_topology.nodes)

        # Exactly one connection on the channel's node, holding its subscriptions.
        (connection,) = await hub_clients(redis_topology, hub, stream_id)
        assert connection[redis_topology.subscription_count_field()] == str(stats["channels"])
        assert "P" in connection["flags"]  # a pub/sub client
        assert await numsub(redis_topology, stream_id) == 1

        await bus.post(stream_id, update("to everyone"))
        seqs = await asyncio.gather(*(next_event_seq(sub) for sub in subs))
        assert seqs == [1] * 100
        assert hub.stats()["delivered"] - before["delivered"] == 100
    assert hub.stats()["subscribers"] == before["subscribers"]


async def test_idle_health_checks_keep_the_connection_usable(
    redis_factory: Callable[[], RedisClient], bus: MessageBus, stream_id: str
) -> None:
    async with own_hub(redis_factory, health_check_interval=0.1) as own:
        # PING while nothing is subscribed answers +PONG ...
        await eventually(lambda: _checks(own, 2), what="idle health checks")
        async with own.subscribe(stream_id) as sub:
            # ... and ["pong", ""] while subscribed; neither confuses reply matching.
            done = own.stats()["health_checks"]
            await eventually(lambda: _checks(own, done + 2), what="subscribed health checks")
            await bus.post(stream_id, update("still here"))
            assert await next_event_seq(sub) == 1
        assert own.stats()["reconnects"] == 0


async def _checks(hub: SubscriptionHub, at_least: int) -> bool:
    return bool(hub.stats()["health_checks"] >= at_least)


async def test_subscribing_without_redis_fails_fast_with_subscription_lost(stream_id: str) -> None:
    from spindle.dev.processes import free_port

    client = aioredis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.2)
    unreachable = SubscriptionHub(client, confirm_timeout=0.2)
    await unreachable.start()  # does not raise: it keeps retrying in the background
    try:
        assert unreachable.stats()["connected"] is False
        with pytest.raises(SubscriptionLost, match="no Redis"):
            async with unreachable.subscribe(stream_id):
                pass
    finally:
        await unreachable.stop()
        await client.aclose()


async def test_a_resharded_channel_is_lost_then_followed_to_its_new_node(
    redis_cluster: RedisTopology, stream_id: str
) -> None:
    cluster = redis_cluster
    channel = live_channel(stream_id)
    slot = key_slot(channel.encode())
    old_owner = cluster.port_of(channel)
    new_owner = next(port for port in cluster.nodes if port != old_owner)
    clients = [cluster.client() for _ in range(3)]
    bus = MessageBus(clients[0])
    watching, stale = SubscriptionHub(clients[1]), SubscriptionHub(clients[2])
    await watching.start()
    await stale.start()  # its slot map is read now, before the reshard
    try:
        async with watching.subscribe(stream_id) as sub:
            await bus.post(stream_id, update("before"))
            assert await next_event_seq(sub) == 1

            await asyncio.to_thread(move_slot, cluster, slot, new_owner)
            # The old node unsubscribed the channel: the feed is lost, not silent.
            with pytest.raises(SubscriptionLost, match="moved"):
                await asyncio.wait_for(sub.get(), 5)

        # A hub with the old slot map is sent to the old node, answered MOVED,
        # refreshes its map and subscribes on the new owner.
        async with stale.subscribe(stream_id) as moved, watching.subscribe(stream_id) as again:
            posted = await bus.post(stream_id, update("after"))  # the bus follows MOVED too
            assert posted.seq == 2
            assert await next_event_seq(moved) == 2
            assert await next_event_seq(again) == 2
            assert await cluster.numsub(channel) == 2  # both on the new owner
            assert cluster.port_of(channel) == new_owner
        assert stale.stats()["redirects"] == 1  # the old node answered MOVED once
        assert watching.stats()["redirects"] == 0  # it had refreshed its map already
    finally:
        await asyncio.to_thread(move_slot, cluster, slot, old_owner)
        await watching.stop()
        await stale.stop()
        for client in clients:
            await client.aclose()
