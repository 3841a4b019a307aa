"""The archive outbox against real Redis and nx-27017: writes MongoDB cannot
take wait in Redis, in order, and reach MongoDB once it answers.

"MongoDB down" here is an archive whose client points at a port nothing
listens on; the process-level outage (a real nx-27017 stopped mid-run) is
``test_mongo_outage.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from pymongo import AsyncMongoClient

from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.runs import NodeReport, NodeStatus
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.open_pages import message_slot
from spindle.worker.archive.catch_up import ArchiveCatchUp
from spindle.worker.archive.operations import (
    ArchiveOperation,
    SaveMessages,
    SaveNodeReport,
    UpdateRun,
)
from spindle.worker.archive.outbox import PAGE_STATE_TTL_MILLISECONDS, ArchiveOutbox
from spindle.worker.archive.writes import archive_later, archive_write, attach_outbox
from tests.polling import eventually

pytestmark = pytest.mark.integration

IDENTITY = {"run_id": "r1", "tenant_id": "t1", "graph_name": "g"}


@pytest.fixture
def database() -> str:
    """A database (and so an outbox) of this test only."""
    return f"outbox_{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url, decode_responses=False)
    yield client
    await client.aclose()


@pytest.fixture
async def archive(mongo_url: str, database: str) -> AsyncIterator[RunArchive]:
    up = RunArchive(AsyncMongoClient(mongo_url, tz_aware=True), database)
    yield up
    await up.close()


@pytest.fixture
async def down(database: str) -> AsyncIterator[RunArchive]:
    """The same database on a MongoDB that does not answer."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{free_port()}", serverSelectionTimeoutMS=20_000
    )
    dead = RunArchive(client, database)
    yield dead
    await dead.close()


@pytest.fixture
def outbox(redis: aioredis.Redis, database: str) -> ArchiveOutbox:
    return ArchiveOutbox(redis, database, write_timeout=0.5)


def messages(stream_id: str, *seqs: int) -> SaveMessages:
    stored = [StoredMessage(s, 1000 + s, f'{{"ts":{1000 + s},"t":3}}'.encode()) for s in seqs]
    return SaveMessages.of(stream_id, stored)


async def test_a_write_mongo_cannot_take_waits_and_fails_fast(
    outbox: ArchiveOutbox, down: RunArchive, archive: RunArchive
) -> None:
    started = time.monotonic()
    took = await outbox.write(down, messages("s1", 1, 2))
    assert took is False
    # The client would wait 20 s to find a server: the outbox gives up at 0.5 s.
    assert time.monotonic() - started < 3
    assert await outbox.pending() == 1
    assert await archive.messages("s1") == []

    assert await outbox.drain(archive) == 1
    assert [m.seq for m in await archive.messages("s1")] == [1, 2]
    assert await outbox.pending() == 0


async def test_writes_queue_behind_a_backlog_so_a_run_s_updates_stay_in_order(
    outbox: ArchiveOutbox, down: RunArchive, archive: RunArchive
) -> None:
    paused = UpdateRun(workflow_id="w1", create_with=IDENTITY, fields={"status": "paused"})
    completed = UpdateRun(workflow_id="w1", create_with=IDENTITY, fields={"status": "completed"})
    assert await outbox.write(down, paused) is False
    # MongoDB answers again, but the older write has not been replayed yet.
    assert await outbox.write(archive, completed) is False
    assert await archive.get_run("w1") is None
    assert await outbox.pending() == 2

    assert await outbox.drain(archive) == 2
    run = await archive.get_run("w1")
    assert run is not None and run.status == "completed" and run.tenant_id == "t1"
    # With the backlog gone, writes go straight to MongoDB again.
    assert await outbox.write(archive, messages("s2", 7)) is True
    assert await outbox.pending() == 0


async def test_replaying_an_applied_write_changes_nothing(
    outbox: ArchiveOutbox, archive: RunArchive
) -> None:
    report = NodeReport(node_id="n1", node_type="tool", status=NodeStatus.SUCCESS)
    ops: list[ArchiveOperation] = [
        messages("s3", 1, 2, 3),
        SaveNodeReport(workflow_id="w3", report=report, output={"x": 1}),
        UpdateRun(workflow_id="w3", create_with=IDENTITY, fields={"status": "completed"}),
    ]
    for op in ops:
        assert await outbox.write(archive, op) is True
    for op in ops:  # as if a process died after MongoDB took them, before the pop
        await outbox.push(op)
    assert await outbox.drain(archive) == 3
    assert [m.seq for m in await archive.messages("s3")] == [1, 2, 3]
    reports = await archive.node_reports("w3")
    assert [(r["node_id"], r["output"]) for r in reports] == [("n1", {"x": 1})]
    run = await archive.get_run("w3")
    assert run is not None and run.status == "completed"


async def test_a_write_mongo_refuses_for_good_is_set_aside_not_retried_forever(
    outbox: ArchiveOutbox, archive: RunArchive
) -> None:
    bad = UpdateRun(workflow_id="w4", fields={"no_such_field": 1})
    await outbox.push(bad)
    await outbox.push(messages("s4", 1))
    assert await outbox.drain(archive) == 2
    assert await outbox.pending() == 0
    assert [d.op for d in await outbox.dead_letters()] == [bad]
    assert [m.seq for m in await archive.messages("s4")] == [1]


async def test_only_the_lock_holder_drains(
    outbox: ArchiveOutbox, redis: aioredis.Redis, archive: RunArchive
) -> None:
    await outbox.push(messages("s5", 1))
    await redis.set(outbox.lock_key, b"another-process", px=10_000)
    assert await outbox.drain(archive) == 0
    assert await outbox.pending() == 1
    await redis.delete(outbox.lock_key)
    assert await outbox.drain(archive) == 1


async def test_the_catch_up_loop_drains_what_writers_queued(
    outbox: ArchiveOutbox, down: RunArchive, archive: RunArchive
) -> None:
    attach_outbox(down, outbox)
    try:
        await archive_write(down, messages("s6", 1, 2))
        await archive_write(
            down, UpdateRun(workflow_id="w6", create_with=IDENTITY, fields={"status": "failed"})
        )
    finally:
        attach_outbox(down, None)
    assert await outbox.pending() == 2

    catch_up = ArchiveCatchUp(outbox, archive, idle_seconds=0.05)
    catch_up.start()
    try:

        async def caught_up() -> bool:
            run = await archive.get_run("w6")
            return run is not None and len(await archive.messages("s6")) == 2

        await eventually(caught_up, what="the outbox drained into MongoDB", timeout=10)
    finally:
        await catch_up.stop()
    assert await outbox.pending() == 0


# -- the archiver: every write queued, written in batches ------------------------


async def test_while_the_archiver_runs_writes_are_queued_and_written_once_in_batches(
    outbox: ArchiveOutbox, archive: RunArchive
) -> None:
    archiver = ArchiveCatchUp(outbox, archive, idle_seconds=0.05)
    archiver.start()
    attach_outbox(archive, outbox)
    try:
        assert outbox.queue_all, "a running archiver makes writers queue"
        first = await archive_later(archive, messages("s7", 1, 2), messages("s7", 2, 3))
        assert first is not None
        last = await archive_later(
            archive,
            UpdateRun(workflow_id="w7", create_with=IDENTITY, fields={"status": "running"}),
            UpdateRun(workflow_id="w7", fields={"status": "completed"}),
        )
        assert last is not None and last > first
        assert await outbox.applied_through(last, within=10), "the archiver wrote them"
    finally:
        attach_outbox(archive, None)
        await archiver.stop()
    assert not outbox.queue_all
    assert await outbox.pending() == 0
    # Seq 2 was queued twice: archived once; the run's updates landed in order.
    assert [m.seq for m in await archive.messages("s7")] == [1, 2, 3]
    run = await archive.get_run("w7")
    assert run is not None and run.status == "completed"


async def test_runs_whose_batches_two_workers_write_keep_one_page_of_each_kind(
    outbox: ArchiveOutbox, archive: RunArchive, redis: aioredis.Redis, database: str
) -> None:
    """Under load every ``finish_run`` cuts the archiver's batch short, so a run's
    nodes land in different batches, which two workers' archivers take turns to
    write: each goes on the run's open pages all the same."""
    other_worker = ArchiveOutbox(redis, database, write_timeout=0.5)
    runs = [f"w10-{n}-{uuid.uuid4().hex[:6]}" for n in range(3)]
    for node in range(1, 5):
        drainer = (outbox, other_worker)[node % 2]
        for run in runs:
            report = NodeReport(node_id=f"n{node}", node_type="tool", status=NodeStatus.SUCCESS)
            await outbox.push(
                messages(run, 2 * node - 1, 2 * node),
                SaveNodeReport(workflow_id=run, report=report, output={"v": node}),
            )
            assert await drainer.drain(archive) == 2, "a batch of its own"
    for run in runs:
        assert await archive.message_pages.count_documents({"stream_id": run}) == 1
        assert await archive.node_report_pages.count_documents({"workflow_id": run}) == 1
        assert [m.seq for m in await archive.messages(run)] == list(range(1, 9))
        assert [r["node_id"] for r in await archive.node_reports(run)] == ["n1", "n2", "n3", "n4"]
        # The pages' states wait in Redis for the run's next batch, and expire.
        expires_in = await redis.pttl(outbox.page_key(message_slot(run)))
        assert 0 < expires_in <= PAGE_STATE_TTL_MILLISECONDS


async def test_a_batch_that_stays_queued_leaves_the_pages_states_as_they_were(
    outbox: ArchiveOutbox, archive: RunArchive, down: RunArchive, redis: aioredis.Redis
) -> None:
    await outbox.push(messages("s11", 1))
    assert await outbox.drain(archive) == 1
    state = await redis.get(outbox.page_key(message_slot("s11")))
    await outbox.push(messages("s11", 2))
    with pytest.raises(TimeoutError):  # MongoDB did not answer within the write timeout
        await outbox.drain(down)
    assert await redis.get(outbox.page_key(message_slot("s11"))) == state
    assert await outbox.drain(archive) == 1
    assert await archive.message_pages.count_documents({"stream_id": "s11"}) == 1
    assert [m.seq for m in await archive.messages("s11")] == [1, 2]


async def test_a_batch_written_twice_changes_nothing(
    outbox: ArchiveOutbox, archive: RunArchive, redis: aioredis.Redis
) -> None:
    """A drainer that wrote a batch and died before popping it: the next one
    writes the same batch again, and the archive holds each message once."""
    ops: list[ArchiveOperation] = [
        messages("s8", 1, 2),
        SaveNodeReport(
            workflow_id="w8",
            report=NodeReport(node_id="n1", node_type="tool", status=NodeStatus.SUCCESS),
            output={"v": 1},
        ),
        messages("s8", 3),
    ]
    for op in ops:
        await op.apply(archive)  # the dead drainer's write
    await outbox.push(*ops)
    assert await outbox.drain(archive) == 3
    assert await outbox.pending() == 0
    assert [m.seq for m in await archive.messages("s8")] == [1, 2, 3]
    assert [r["node_id"] for r in await archive.node_reports("w8")] == ["n1"]
    assert int(await redis.get(outbox.done_key) or 0) == int(await redis.get(outbox.queued_key))


async def test_a_writer_waiting_for_the_archive_gives_up_while_mongo_is_down(
    outbox: ArchiveOutbox, down: RunArchive
) -> None:
    archiver = ArchiveCatchUp(outbox, down, idle_seconds=0.05)
    archiver.start()
    try:
        ticket = await archive_later(down, messages("s9", 1), outbox=outbox)
        assert ticket is not None
        assert await outbox.applied_through(ticket, within=0.3) is False
    finally:
        await archiver.stop()
    assert await outbox.pending() == 1, "the write waits in Redis for MongoDB"
