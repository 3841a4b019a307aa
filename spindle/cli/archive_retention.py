"""Archive retention: delete runs older than a cut-off with their messages, node
reports, NodeMessage trace and recorded calls, and the map item pages (``item_blobs``) of those
runs and of any run stored before the cut-off.

The cut-off is the ``archive_retention_days`` setting unless given: for that
long every stream resumes from any cursor, and an older cursor gets an explicit
CURSOR_EXPIRED answer (docs/streaming/gap-free.md#retention).

Works on MongoDB and on the nx-27017 wire server alike: only ``find`` with a
range on ``created_at`` (a real date: it is written on insert), and
``delete_many`` with ``$in`` on ids, in bounded batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from spindle.shared.store.archive import page_messages, utcnow
from spindle.shared.store.call_records import CALL_RECORDS
from spindle.shared.store.item_pages import ItemStore

if TYPE_CHECKING:
    from spindle.shared.store.archive import RunArchive

# How many runs are deleted per round trip (bounded ``$in`` lists).
PRUNE_BATCH = 500


@dataclass(frozen=True)
class PruneCounts:
    """How many of each a prune deleted (or, in a dry run, would delete); messages are
    counted one by one, also those a page holds."""

    runs: int = 0
    messages: int = 0
    node_reports: int = 0
    trace_messages: int = 0
    item_pages: int = 0


def cutoff_for(days: float) -> datetime:
    """The creation time before which a run is older than ``days`` days."""
    return utcnow() - timedelta(days=days)


async def prune_runs(
    archive: RunArchive,
    *,
    older_than: datetime,
    dry_run: bool = False,
    workflow_ids: Sequence[str] | None = None,
) -> PruneCounts:
    """Delete runs created before ``older_than``, with their messages, node reports,
    NodeMessage trace (``run_trace``) and map item pages.

    A run's messages are those of its stream (the run's workflow id; workstream
    children post to their parent's stream, so they go with the parent).

    Args:
        archive: the archive to prune.
        older_than: runs created strictly before this (aware UTC) are deleted.
        dry_run: count what would be deleted, delete nothing.
        workflow_ids: only these runs (and their item pages, whenever stored).
    """
    query: dict[str, Any] = {"created_at": {"$lt": older_than}}
    if workflow_ids is not None:
        query["_id"] = {"$in": list(workflow_ids)}
    cursor = archive.runs.find(query, {"_id": 1})
    ids = [str(doc["_id"]) async for doc in cursor]
    runs = messages = reports = traced = 0
    for start in range(0, len(ids), PRUNE_BATCH):
        batch = ids[start : start + PRUNE_BATCH]
        by_stream = {"stream_id": {"$in": batch}}
        by_workflow = {"workflow_id": {"$in": batch}}
        # A run's NodeMessages, and those of its workstream children (their stream).
        by_trace_stream = {"streamId": {"$in": batch}}
        if dry_run:
            runs += len(batch)
            messages += await archive.messages_coll.count_documents(by_stream)
            messages += await _paged_messages(archive, by_stream)
            # Workstream children's node reports (and the NodeMessages they keep)
            # go with the stream they posted to, their parent's.
            either = {"$or": [by_workflow, by_stream]}
            reports += await archive.node_reports_coll.count_documents(either)
            reports += await _paged_reports(archive, either)
            traced += await archive.run_trace_coll.count_documents(by_trace_stream)
            continue
        # Children first: a run is only gone once nothing of it is left behind.
        messages += (await archive.messages_coll.delete_many(by_stream)).deleted_count
        messages += await _paged_messages(archive, by_stream)
        await archive.message_pages.delete_many(by_stream)
        reports += (await archive.node_reports_coll.delete_many(by_workflow)).deleted_count
        reports += (await archive.node_reports_coll.delete_many(by_stream)).deleted_count
        for query in (by_workflow, by_stream):
            reports += await _paged_reports(archive, query)
            await archive.node_report_pages.delete_many(query)
        traced += (await archive.run_trace_coll.delete_many(by_trace_stream)).deleted_count
        # Recorded tool calls and LLM turns (recorded replay) go with their run.
        await archive.database[CALL_RECORDS].delete_many(by_workflow)
        runs += (await archive.runs.delete_many({"_id": {"$in": batch}})).deleted_count
    # Map item pages: those of the runs above, and any stored before the cut-off
    # (a run that was never archived leaves pages too).
    # With ``workflow_ids``, only those runs' pages: no cut-off for the others.
    stored_before = older_than if workflow_ids is None else datetime.min.replace(tzinfo=UTC)
    pages = await ItemStore(archive.database).prune(
        stored_before=stored_before, workflow_ids=ids, dry_run=dry_run
    )
    return PruneCounts(
        runs=runs,
        messages=messages,
        node_reports=reports,
        trace_messages=traced,
        item_pages=pages,
    )


async def _paged_messages(archive: RunArchive, query: dict[str, Any]) -> int:
    """How many messages the ``message_pages`` matching ``query`` hold."""
    held = 0
    async for page in archive.message_pages.find(query, {"messages": 1, "by_seq": 1}):
        held += len(page_messages(page))
    return held


async def _paged_reports(archive: RunArchive, query: dict[str, Any]) -> int:
    """How many node reports the ``node_report_pages`` matching ``query`` hold
    (a node execution saved on two pages counts twice)."""
    held = 0
    async for page in archive.node_report_pages.find(query, {"reports": 1, "by_key": 1}):
        held += len(page.get("reports") or page.get("by_key") or ())
    return held
