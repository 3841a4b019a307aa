"""The other Lua scripts and multi-key steps of Spindle on a single server and on
a three-master Redis Cluster: task events (append + sharded publish), the push
outbox (enqueue, claim, deliver) and the archive outbox (queue, lock, replay).
On a cluster each must keep its keys on one slot, or Redis refuses it with
CROSSSLOT."""

from __future__ import annotations

import asyncio
import time
import uuid

import httpx
import pytest

from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.tasks import new_task_id
from spindle.shared.platform.redis_connect import RedisClient
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.open_pages import message_slot
from spindle.shared.tasks.events import TaskEventLog, events_stream_id, status_event
from spindle.shared.tasks.push import PushConfig, PushOutbox
from spindle.worker.archive.operations import SaveMessages
from spindle.worker.archive.outbox import ArchiveOutbox
from tests.callback_receiver import callback_receiver
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.redis_topologies]


async def test_task_events_are_stored_and_published_live(
    redis_client: RedisClient, hub: SubscriptionHub
) -> None:
    root = new_task_id()
    log = TaskEventLog(redis_client)
    async with hub.subscribe(events_stream_id(root)) as sub:
        for status in ("in_progress", "completed"):
            await log.append(
                status_event(task_id=root, root_task_id=root, status=status, progress=0.5)
            )
        live = [await asyncio.wait_for(sub.get(), 5) for _ in range(2)]

    assert [(e.seq, e.ends) for e in live] == [(1, False), (2, True)]
    stored = await log.since(root)
    assert [(seq, event.data.status) for seq, event in stored] == [
        (1, "in_progress"),
        (2, "completed"),
    ]


async def test_push_outbox_queues_claims_and_delivers(redis_client: RedisClient) -> None:
    root = new_task_id()
    outbox = PushOutbox(redis_client)
    async with callback_receiver(lambda n: 200) as receiver:
        await outbox.configure(root, PushConfig(url=receiver.url))
        for status in ("in_progress", "completed"):
            event = status_event(task_id=root, root_task_id=root, status=status, progress=1.0)
            assert await outbox.enqueue(event)
        async with httpx.AsyncClient() as client:

            async def delivered() -> bool:
                await outbox.drain(client)
                return len(receiver.accepted()) == 2

            await eventually(delivered, what="both pushes delivered", timeout=10)
    assert [b["status"] for b in receiver.accepted()] == ["in_progress", "completed"]
    assert await outbox.pending(root) == 0


async def test_archive_outbox_queues_and_replays_under_its_lock(
    redis_client: RedisClient, archive: RunArchive
) -> None:
    outbox = ArchiveOutbox(redis_client, f"topology-{uuid.uuid4().hex[:8]}")
    stream = f"outbox-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    messages = [StoredMessage(seq, now + seq, b'{"ts":%d,"t":3}' % (now + seq)) for seq in (1, 2)]
    await outbox.push(SaveMessages.of(stream, messages[:1]))
    await outbox.push(SaveMessages.of(stream, messages[1:]))
    assert await outbox.pending() == 2

    assert await outbox.drain(archive) == 2
    assert await outbox.pending() == 0
    assert [m.seq for m in await archive.messages(stream)] == [1, 2]
    assert await redis_client.exists(outbox.lock_key) == 0  # released
    # The stream's open page, saved with the pop (the same hash slot as the queue).
    assert await redis_client.exists(outbox.page_key(message_slot(stream))) == 1
