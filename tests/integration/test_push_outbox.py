"""The push-notification outbox against a real Redis and a loopback receiver."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis

from spindle.shared.contracts.errors import OutboundRefused, ValidationFailed
from spindle.shared.contracts.tasks import new_task_id
from spindle.shared.platform.outbound import OutboundPolicy, guarded_client
from spindle.shared.tasks import push as push_notifications
from spindle.shared.tasks.events import TaskEvent, status_event
from spindle.shared.tasks.push import (
    DEAD_KEY,
    DUE_KEY,
    DeliveryLimits,
    PushConfig,
    PushDelivery,
    PushJob,
    PushOutbox,
    push_config_of,
)
from tests.callback_receiver import callback_receiver
from tests.polling import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def outbox(redis_url: str) -> AsyncIterator[PushOutbox]:
    # A database of its own: the e2e and fault workers of this session drain the
    # push queue of database 0 in the background and would add their attempts.
    base = redis_url.rsplit("/", 1)[0] if redis_url.count("/") > 2 else redis_url
    client = aioredis.Redis.from_url(f"{base}/7", decode_responses=False)
    assert client.connection_pool.connection_kwargs["db"] == 7
    await client.flushdb()
    yield PushOutbox(client)
    await client.aclose()


def update(root: str, status: str = "in_progress") -> TaskEvent:
    return status_event(task_id=root, root_task_id=root, status=status, progress=0.0)


async def test_a_tree_without_push_config_queues_nothing(outbox: PushOutbox) -> None:
    root = new_task_id()
    assert await outbox.enqueue(update(root)) is False
    assert await outbox.pending(root) == 0


async def test_updates_arrive_in_order_with_headers_after_a_refusal(outbox: PushOutbox) -> None:
    root = new_task_id()
    async with callback_receiver(lambda n: 503 if n == 0 else 200) as receiver:
        await outbox.configure(root, PushConfig(url=receiver.url, token="tok"))
        for status in ("in_progress", "completed"):
            assert await outbox.enqueue(update(root, status))
        async with httpx.AsyncClient() as client:

            async def all_delivered() -> bool:
                await outbox.drain(client)
                return len(receiver.accepted()) == 2

            await eventually(all_delivered, what="both updates delivered", timeout=10)
    assert receiver.statuses == [503, 200, 200]
    assert [b["status"] for b in receiver.accepted()] == ["in_progress", "completed"]
    assert receiver.headers[-1]["authorization"] == "Bearer tok"
    assert await outbox.pending(root) == 0
    assert await outbox.redis.zscore(DUE_KEY, root) is None


async def test_a_receiver_that_never_accepts_is_given_up_on(
    outbox: PushOutbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(push_notifications, "MAX_ATTEMPTS", 3)
    monkeypatch.setattr(push_notifications, "BACKOFF_FIRST_SECONDS", 0.01)
    root = new_task_id()
    async with callback_receiver(lambda n: 500) as receiver:
        await outbox.configure(root, PushConfig(url=receiver.url))
        await outbox.enqueue(update(root))
        async with httpx.AsyncClient() as client:

            async def abandoned() -> bool:
                await outbox.drain(client)
                return await outbox.pending(root) == 0

            await eventually(abandoned, what="the update is dead-lettered", timeout=10)
    assert receiver.statuses == [500, 500, 500]
    assert await outbox.redis.zscore(DUE_KEY, root) is None
    dead = await outbox.redis.lrange(DEAD_KEY, -1, -1)
    assert root.encode() in dead[0]


def test_a_malformed_config_names_its_field() -> None:
    bad = {"configuration": {"push_notification_config": {"url": "ftp://x"}}}
    with pytest.raises(ValidationFailed) as caught:
        push_config_of(bad, {})
    assert caught.value.errors[0]["field"] == "configuration.push_notification_config.url"
    assert push_config_of({}, {}) is None


@contextlib.asynccontextmanager
async def silent_server() -> AsyncIterator[tuple[int, list[int]]]:
    """Accepts connections and never answers; yields its port and the live connection count."""
    live = [0]
    peak = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        try:
            # Read (never answer) until the client gives up and closes.
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        finally:
            live[0] -= 1
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], peak
    finally:
        server.close()


async def test_a_tenant_with_dead_receivers_does_not_delay_another_tenants_push(
    outbox: PushOutbox,
) -> None:
    # Issue 15 (M6): 48 never-answering URLs of tenant B held tenant A's push for 20-33 s.
    policy = OutboundPolicy.parse("127.0.0.1/32")
    async with silent_server() as (port, peak), callback_receiver(lambda n: 200) as receiver:
        for n in range(48):
            root = new_task_id()
            config = PushConfig(url=f"http://127.0.0.1:{port}/hook/{n}", tenant_id="tenant-b")
            await outbox.configure(root, config)
            assert await outbox.enqueue(update(root))
        root_a = new_task_id()
        await outbox.configure(root_a, PushConfig(url=receiver.url, tenant_id="tenant-a"))
        assert await outbox.enqueue(update(root_a))

        delivery = PushDelivery(outbox, policy=policy)
        delivery.start()
        try:
            # The acceptance figure, as the bound of the wait for the event.
            await eventually(receiver.accepted, what="tenant A's push", timeout=2.0)
        finally:
            await delivery.stop()
        assert receiver.accepted()[0]["task_id"] == root_a
        assert peak[0] <= outbox.limits.per_destination, "one destination, bounded POSTs"


async def test_delivery_refuses_a_destination_the_policy_refuses(outbox: PushOutbox) -> None:
    # A config written before the policy existed (or by anything but the gateway)
    # is still checked on the connection.
    async with callback_receiver(lambda n: 200) as receiver:
        root = new_task_id()
        await outbox.configure(root, PushConfig(url=receiver.url))
        await outbox.enqueue(update(root))
        async with guarded_client(OutboundPolicy(), timeout=2) as client:
            assert await outbox.drain(client) == 0
        head = await outbox.redis.lindex(outbox.queue_key(root), 0)
        assert head is not None and PushJob.model_validate_json(head).attempts == 1
    assert receiver.statuses == []


async def test_a_failing_destination_opens_its_breaker(outbox: PushOutbox) -> None:
    outbox = PushOutbox(outbox.redis, DeliveryLimits(breaker_failures=2, breaker_seconds=60))
    policy = OutboundPolicy.parse("127.0.0.1/32")
    async with callback_receiver(lambda n: 500) as receiver:
        roots = [new_task_id() for _ in range(3)]
        for root in roots:
            await outbox.configure(root, PushConfig(url=receiver.url, tenant_id="t"))
            await outbox.enqueue(update(root))
        async with guarded_client(policy, timeout=2) as client:
            first = await outbox.dispatch(client)
            await asyncio.gather(*first)
            assert len(receiver.statuses) == 3
            # The retries are due at once, but the destination's breaker holds them.
            await outbox.redis.zadd(DUE_KEY, dict.fromkeys(roots, 0), xx=True)
            assert await outbox.dispatch(client) == []
    assert len(receiver.statuses) == 3
    held = await outbox.redis.zscore(DUE_KEY, roots[0])
    assert held is not None and held > time.time() * 1000 + 30_000


def test_a_refused_url_or_header_names_its_field() -> None:
    policy = OutboundPolicy()
    for url in ("http://127.0.0.1:6379/", "http://user:pw@example.com/", "http://[::1]:7243/"):
        bad = {"configuration": {"push_notification_config": {"url": url}}}
        with pytest.raises(OutboundRefused) as caught:
            push_config_of(bad, {}, policy)
        assert caught.value.errors[0]["field"] == "configuration.push_notification_config.url"
        assert caught.value.jsonrpc_code == -32602
    host = {"url": "https://example.com/h", "headers": {"Host": "redis:6379"}}
    with pytest.raises(OutboundRefused) as caught:
        push_config_of({"configuration": {"push_notification_config": host}}, {}, policy)
    assert caught.value.errors[0]["field"] == "configuration.push_notification_config.headers"


async def test_logged_push_urls_carry_no_credentials(
    outbox: PushOutbox, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 15 (low): push URLs with embedded passwords were logged.
    policy = OutboundPolicy.parse("127.0.0.1/32")
    async with callback_receiver(lambda n: 500) as receiver:
        root = new_task_id()
        url = f"http://bob:hunter2@127.0.0.1:{receiver.port}/hook?token=s3cret"
        await outbox.configure(root, PushConfig(url=url))
        await outbox.enqueue(update(root))
        with caplog.at_level("INFO"):
            async with guarded_client(policy, timeout=2) as client:
                await outbox.drain(client)
        plain = PushConfig(url=f"{receiver.url}?token=s3cret")
        await outbox.configure(root, plain)
        await outbox.redis.zadd(DUE_KEY, {root: 0}, xx=True)
        with caplog.at_level("INFO"):
            async with guarded_client(policy, timeout=2) as client:
                await outbox.drain(client)
    assert receiver.statuses == [500], "the URL with credentials was never called"
    # configure_logging silences httpx's own request lines (tests/unit/test_outbound_policy.py).
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name != "httpx")
    assert f"127.0.0.1:{receiver.port}/hook" in logged
    assert "hunter2" not in logged and "s3cret" not in logged and "bob" not in logged
