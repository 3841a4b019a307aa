"""``spindle archive prune`` as a user runs it, against the session's Mongo wire server."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.runs import NodeReport, NodeStatus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import (
    MESSAGE_PAGES,
    NODE_REPORT_PAGES,
    MessagesToPage,
    OpenPages,
    RunArchive,
    RunRecord,
    message_entries,
    node_report_write,
    utcnow,
)
from spindle.shared.store.item_pages import (
    CHUNKS_COLLECTION,
    HEADERS_COLLECTION,
    INPUT,
    RESULTS,
    ItemStore,
    items_key,
)
from spindle.shared.store.run_trace import NodeFinished, TraceEntry, run_trace, save_trace
from tests.cli_runner import run_spindle

pytestmark = pytest.mark.integration

DB = "spindle_prune"


def spindle(mongo_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_spindle(*args, SPINDLE_MONGO_URL=mongo_url, SPINDLE_MONGO_DB=DB)


@pytest.fixture
async def archive(mongo_url: str) -> AsyncIterator[RunArchive]:
    archive = RunArchive.from_settings(Settings(mongo_url=mongo_url, mongo_db=DB))
    await archive.ensure_indexes()
    yield archive
    await archive.close()


def node_envelopes(prefix: str, node: str) -> list[TraceEntry]:
    """A node's input and output NodeMessages, ``<prefix>-input`` and ``<prefix>-output``."""
    return [
        TraceEntry(
            message={"messageId": f"{prefix}-{role}", "from": node, "timestamp": "2025-01-01"},
            node_id=node,
            role=role,
        )
        for role in ("input", "output")
    ]


async def seed_run(archive: RunArchive, *, age_days: float, messages: int) -> str:
    """A finished run created ``age_days`` ago, with messages, one node report and
    its two NodeMessages (input and output) in the trace collection."""
    workflow_id = f"prune-{uuid.uuid4().hex[:12]}"
    created = utcnow() - timedelta(days=age_days)
    await archive.create_run(
        RunRecord(
            workflow_id=workflow_id,
            run_id="r1",
            graph_name="g",
            status="completed",
            created_at=created,
            updated_at=created,
        )
    )
    stored = [
        StoredMessage(seq, 1_700_000_000_000 + seq, b'{"m":"hi"}') for seq in range(1, messages + 1)
    ]
    # The first message as a direct write leaves it (a page of its own), the rest
    # and the node report as the archiver leaves them: on its open pages.
    await archive.save_messages(workflow_id, stored[:1])
    open_pages = OpenPages()
    report = NodeReport(node_id="a", node_type="tool", status=NodeStatus.SUCCESS)
    await archive.bulk_apply(
        [
            (MESSAGE_PAGES, MessagesToPage(workflow_id, message_entries(stored[1:]))),
            (NODE_REPORT_PAGES, node_report_write(workflow_id, report)),
        ],
        pages=open_pages,
    )
    await save_trace(archive, workflow_id, "r1", node_envelopes(workflow_id, "a"))
    # A workstream child's node, archived as a node's end is now: its report keeps its
    # envelopes and names the stream it posted to, its parent's.
    child = node_envelopes(f"{workflow_id}-ws", "b")
    await NodeFinished(
        workflow_id=f"{workflow_id}.ws-1",
        run_id="c1",
        stream_id=workflow_id,
        report=NodeReport(node_id="b", node_type="tool", status=NodeStatus.SUCCESS),
        input=child[0].message,
        output=child[1].message,
        trace=child,
    ).apply(archive)
    # A map's pages: its input and results (two pages each).
    pages = ItemStore(archive.database)
    key = items_key(workflow_id, "r1", "each", 1)
    for kind in (INPUT, RESULTS):
        for page in (0, 1):
            await pages.put(key, kind, page, [{"item": page}])
    return workflow_id


async def page_count(archive: RunArchive, workflow_id: str) -> tuple[int, int]:
    """(page headers, chunks) stored for ``workflow_id``'s maps."""
    headers = [
        doc async for doc in archive.database[HEADERS_COLLECTION].find({"workflow_id": workflow_id})
    ]
    files = [doc["files_id"] for doc in headers]
    chunks = await archive.database[CHUNKS_COLLECTION].count_documents({"files_id": {"$in": files}})
    return len(headers), chunks


async def test_prune_deletes_old_runs_with_their_messages_and_reports(
    archive: RunArchive, mongo_url: str
) -> None:
    old = await seed_run(archive, age_days=40, messages=3)
    older = await seed_run(archive, age_days=400, messages=2)
    recent = await seed_run(archive, age_days=1, messages=4)
    # Earlier runs of this test may have left nothing old behind; count from here.
    before = await archive.runs.count_documents(
        {"created_at": {"$lt": utcnow() - timedelta(days=30)}}
    )
    assert before == 2

    dry = spindle(mongo_url, "archive", "prune", "--older-than-days", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == (
        "would delete 2 runs, 5 messages, 4 node reports, 4 trace messages, 8 item pages"
    )
    assert await archive.get_run(old) is not None

    done = spindle(mongo_url, "archive", "prune", "--older-than-days", "30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "deleted 2 runs, 5 messages, 4 node reports, 4 trace messages, 8 item pages"
    )

    for gone in (old, older):
        assert await archive.get_run(gone) is None
        assert await archive.messages(gone) == []
        assert await archive.node_reports(gone) == []
        assert await run_trace(archive, gone) == []
        assert await run_trace(archive, f"{gone}.ws-1") == []  # the child's, in its report
        assert await page_count(archive, gone) == (0, 0)  # no header, no chunk left
    kept = await archive.get_run(recent)
    assert kept is not None and kept.status == "completed"
    assert len(await archive.messages(recent)) == 4
    assert len(await archive.node_reports(recent)) == 1
    assert [m["role"] for m in await run_trace(archive, recent)] == ["input", "output"]
    assert [m["nodeId"] for m in await run_trace(archive, f"{recent}.ws-1")] == ["b", "b"]
    assert await page_count(archive, recent) == (4, 4)
    assert await ItemStore(archive.database).get(
        items_key(recent, "r1", "each", 1), RESULTS, 1
    ) == [{"item": 1}]

    # Nothing is old enough any more: a second prune deletes nothing.
    again = spindle(mongo_url, "archive", "prune", "--older-than-days", "30")
    assert again.stdout.strip() == (
        "deleted 0 runs, 0 messages, 0 node reports, 0 trace messages, 0 item pages"
    )
    await archive.runs.delete_many({"_id": recent})


async def test_prune_deletes_item_pages_stored_before_the_cutoff_without_a_run(
    archive: RunArchive, mongo_url: str
) -> None:
    """Pages of a run the archive never recorded (archive off) still age out."""
    pages = ItemStore(archive.database)
    orphan = f"orphan-{uuid.uuid4().hex[:12]}"
    await pages.put(items_key(orphan, "r1", "each", 1), INPUT, 0, ["a", "b"])
    await archive.database[HEADERS_COLLECTION].update_many(
        {"workflow_id": orphan}, {"$set": {"stored_at": utcnow() - timedelta(days=40)}}
    )
    kept = f"fresh-{uuid.uuid4().hex[:12]}"
    await pages.put(items_key(kept, "r1", "each", 1), INPUT, 0, ["c"])

    done = spindle(mongo_url, "archive", "prune", "--older-than-days", "30")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(", 1 item pages")
    assert await page_count(archive, orphan) == (0, 0)
    assert await page_count(archive, kept) == (1, 1)


def test_prune_refuses_a_negative_age(mongo_url: str) -> None:
    result = spindle(mongo_url, "archive", "prune", "--older-than-days", "-1")
    assert result.returncode == 2
    assert "must be 0 or more" in result.stderr
