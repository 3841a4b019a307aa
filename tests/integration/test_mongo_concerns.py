"""The write and read concerns Spindle sends to MongoDB, as seen on the wire by a
command listener against the real nx-27017 server: ``majority`` by default for
the archive and the task store, and whatever ``SPINDLE_MONGO_WRITE_CONCERN`` /
``SPINDLE_MONGO_READ_CONCERN`` say otherwise."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from pymongo import monitoring

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.tasks import Task, new_task_id
from spindle.shared.platform.mongo import WRITE_CONCERN_MS, mongo_client
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.tasks.store import TaskStore

pytestmark = pytest.mark.integration


class Commands(monitoring.CommandListener):
    """Every command the client sent, by name."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def of(self, name: str) -> list[dict[str, Any]]:
        return [command for sent, command in self.sent if sent == name]


async def test_archive_and_task_store_write_with_majority_and_read_majority(
    mongo_url: str,
) -> None:
    settings = Settings(mongo_url=mongo_url, mongo_db=f"concerns_{uuid.uuid4().hex[:8]}")
    listener = Commands()
    client = mongo_client(settings, appname="concerns-test", event_listeners=[listener])
    archive = RunArchive(client, settings.mongo_db)
    tasks = TaskStore(client[settings.mongo_db])
    try:
        now = int(time.time() * 1000)
        await archive.save_messages("s1", [StoredMessage(1, now, b'{"ts":%d,"t":3}' % now)])
        task = Task(id=new_task_id(), name="t", user_id="u", tenant_id="acme")
        await tasks.insert(task)
        assert [m.seq for m in await archive.messages("s1")] == [1]
        assert await tasks.find("acme", task.id) is not None

        writes = listener.of("insert")
        assert len(writes) == 2
        for write in writes:
            assert write["writeConcern"] == {"w": "majority", "wtimeout": WRITE_CONCERN_MS}
        # Pages and the one-document-per-message archive are both read (and saving
        # reads which messages are archived already): every read takes the concern.
        reads = listener.of("find")
        assert {read["find"] for read in reads} >= {"message_pages", "messages", "tasks"}
        for read in reads:
            assert read["readConcern"] == {"level": "majority"}
    finally:
        await client.drop_database(settings.mongo_db)
        await client.close()


async def test_the_concerns_come_from_the_settings(mongo_url: str) -> None:
    settings = Settings(
        mongo_url=f"{mongo_url}/?w=majority",
        mongo_db=f"concerns_{uuid.uuid4().hex[:8]}",
        mongo_write_concern="1",
        mongo_read_concern="local",
    )
    listener = Commands()
    client = mongo_client(settings, appname="concerns-test", event_listeners=[listener])
    try:
        await client[settings.mongo_db].things.insert_one({"a": 1})
        assert await client[settings.mongo_db].things.find_one({"a": 1}) is not None
        (write,) = listener.of("insert")
        assert write["writeConcern"]["w"] == 1  # the setting wins over the URL
        (read,) = listener.of("find")
        assert read["readConcern"] == {"level": "local"}
    finally:
        await client.drop_database(settings.mongo_db)
        await client.close()
