"""The push-notification outbox against a real Redis and a loopback receiver."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import redis.asyncio as aioredis

from spindle.shared.contracts.errors import ValidationFailed
from spindle.shared.contracts.tasks import new_task_id
from spindle.shared.tasks import push as push_notifications
from spindle.shared.tasks.events import TaskEvent, status_event
from spindle.shared.tasks.push import DEAD_KEY, DUE_KEY, PushConfig, PushOutbox, push_config_of
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
