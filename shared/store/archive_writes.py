"""The archive's write requests, and the pages its messages and node reports become.

``RunArchive.bulk_apply`` (``spindle.shared.store.archive``) applies them; the
archiver (``spindle.worker.archive``) builds many of them and sends them in
one bulk. The collections and documents they write are described in
``spindle.shared.store.archive``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, TypeAlias

import orjson
from pymongo import InsertOne, ReplaceOne, UpdateOne

from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.runs import NodeReport
from spindle.shared.store.open_pages import (
    PAGE_MAX_BYTES,
    PAGE_MAX_MESSAGES,
    OpenPages,
    message_slot,
    report_slot,
    save_stamp,
)
from spindle.shared.store.run_document import as_utc, document_fields, storable, utcnow

DUPLICATE_KEY = 11000
MESSAGE_PAGES = "message_pages"
NODE_REPORT_PAGES = "node_report_pages"
# Collections whose writes in one bulk touch distinct documents and are inserted
# once (a second insert is a duplicate-key error, ignored: call records too) or set fields that
# mean the same each time (open pages): bulks to them need no order.
UNORDERED = frozenset({"messages", MESSAGE_PAGES, NODE_REPORT_PAGES, "call_records"})

# Strings: subscripting pymongo's generic requests at import time touches a lock
# the workflow sandbox restricts (this module is imported there too).
MongoRequest: TypeAlias = "InsertOne[dict[str, Any]] | UpdateOne | ReplaceOne[dict[str, Any]]"
ArchiveRequest: TypeAlias = "MongoRequest | MessagesToPage | ReportToPage"
ArchiveWrite: TypeAlias = "tuple[str, ArchiveRequest]"
"""One write request and the collection it goes to."""


def message_id(stream_id: str, seq: int) -> str:
    return f"{stream_id}:{seq:012d}"


class MessagesToPage(NamedTuple):
    """Archived messages of one stream, as a write request: ``bulk_apply`` gathers
    those of a batch per stream and inserts them as pages (``message_pages``)."""

    stream_id: str
    entries: list[dict[str, Any]]
    """``{seq, ts, raw, traceId?, spanId?}`` each."""


class ReportToPage(NamedTuple):
    """One node report, as a write request: ``bulk_apply`` gathers those of a batch
    per run and inserts them as pages (``node_report_pages``)."""

    workflow_id: str
    stream_id: str
    report: dict[str, Any]
    """The stored report: ``key`` (``node_report_id``) and the report's fields."""


def node_report_id(workflow_id: str, report: NodeReport) -> str:
    return f"{workflow_id}:{report.node_id}:{report.visit}"


# -- write requests (one call applies them; the archiver sends many in one bulk) --


def run_update(
    workflow_id: str, *, create_with: dict[str, Any] | None = None, **fields: Any
) -> UpdateOne:
    """The update ``RunArchive.update_run`` makes (see there), as a bulk request.

    Raises:
        ValueError: a field that ``RunRecord`` does not have.
    """
    update = run_update_document(workflow_id, create_with=create_with, **fields)
    return UpdateOne({"_id": workflow_id}, update, upsert=create_with is not None)


def run_update_document(
    workflow_id: str, *, create_with: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """The update operators of ``RunArchive.update_run``.

    Raises:
        ValueError: a field that ``RunRecord`` does not have.
    """
    to_set = document_fields(fields)
    update: dict[str, Any] = {}
    if to_set:
        update["$set"] = to_set
    if "updated_at" not in fields:
        # $currentDate, not $set: nx-27017 turns a $set datetime into a string.
        update["$currentDate"] = {"updated_at": True}
    if create_with is not None:
        on_insert = {k: v for k, v in document_fields(create_with).items() if k not in to_set}
        on_insert.setdefault("created_at", utcnow())
        on_insert["workflowId"] = workflow_id
        if "status" not in to_set:
            # A run the worker reports on before the gateway wrote it is running.
            on_insert.setdefault("status", "running")
        update["$setOnInsert"] = storable(on_insert)
    return update


def message_page_writes(
    to_page: dict[str, list[dict[str, Any]]], pages: OpenPages | None
) -> list[MongoRequest]:
    if pages is not None:
        return [
            write
            for stream_id, entries in to_page.items()
            for write in pages.message_writes(stream_id, entries)
        ]
    return [
        InsertOne(page)
        for stream_id, entries in to_page.items()
        for page in message_pages(stream_id, entries)
    ]


def report_page_writes(
    to_report_page: dict[tuple[str, str], list[dict[str, Any]]], pages: OpenPages | None
) -> list[MongoRequest]:
    if pages is not None:
        return [
            write
            for (workflow_id, stream_id), reports in to_report_page.items()
            for write in pages.report_writes(workflow_id, stream_id, reports)
        ]
    return [
        InsertOne(page)
        for (workflow_id, stream_id), reports in to_report_page.items()
        for page in node_report_pages(workflow_id, stream_id, reports)
    ]


def page_slots(writes: Sequence[ArchiveWrite]) -> list[str]:
    """The open pages (``message_slot``, ``report_slot``) a batch of writes goes
    on, each once: the states the archiver reads before planning it."""
    slots: dict[str, None] = {}
    for _, request in writes:
        if isinstance(request, MessagesToPage):
            slots[message_slot(request.stream_id)] = None
        elif isinstance(request, ReportToPage):
            slots[report_slot(request.workflow_id, request.stream_id)] = None
    return list(slots)


def page_messages(page: dict[str, Any]) -> list[dict[str, Any]]:
    """A ``message_pages`` document's entries, inserted (``messages``) or open
    (``by_seq``), in no particular order."""
    return list(page.get("messages") or ()) or list((page.get("by_seq") or {}).values())


def page_report_saves(page: dict[str, Any]) -> list[tuple[int, datetime, dict[str, Any]]]:
    """A ``node_report_pages`` document's reports as ``(saved µs, first save,
    report with its key)``, inserted (``reports``) or open (``by_key``)."""
    if "by_key" not in page:
        recorded_at = as_utc(page["recorded_at"])
        saved = int(page.get("saved") or 0)
        return [(saved, recorded_at, report) for report in page.get("reports") or ()]
    saves = []
    for report in (page.get("by_key") or {}).values():
        saved = int(report.pop("saved"))
        saves.append((saved, datetime.fromtimestamp(saved / 1e6, UTC), report))
    return saves


def message_entries(
    messages: Sequence[StoredMessage], *, trace_ids: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """Stored messages as a page keeps them: ``{seq, ts, raw, traceId?, spanId?}``."""
    return [
        {"seq": m.seq, "ts": m.ts, "raw": m.raw.decode(), **(trace_ids or {})} for m in messages
    ]


def message_pages(stream_id: str, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``message_pages`` documents of a stream's message entries: in seq order, each
    seq once, cut at ``PAGE_MAX_MESSAGES`` messages or ``PAGE_MAX_BYTES`` bytes.

    A page's ``_id`` is its stream and seq range, so the same batch written again
    (an outbox replay) is a duplicate insert, ignored.
    """
    ordered = sorted({int(e["seq"]): e for e in reversed(entries)}.items())
    pages: list[list[dict[str, Any]]] = []
    size = 0
    for _, entry in ordered:
        raw_bytes = len(entry["raw"])
        if not pages or len(pages[-1]) >= PAGE_MAX_MESSAGES or size + raw_bytes > PAGE_MAX_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(entry)
        size += raw_bytes
    return [
        {
            "_id": f"{stream_id}:{page[0]['seq']:012d}-{page[-1]['seq']:012d}",
            "stream_id": stream_id,
            "first_seq": page[0]["seq"],
            "last_seq": page[-1]["seq"],
            "messages": page,
        }
        for page in pages
    ]


def node_report_pages(
    workflow_id: str, stream_id: str, reports: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``node_report_pages`` documents of a run's reports saved in one batch: each
    node execution once (its last save), cut at about ``PAGE_MAX_BYTES``.

    A page's ``_id`` is its run and a digest of its reports, so the same batch
    written again (an outbox replay) is a duplicate insert, ignored.
    """
    last = list({str(report["key"]): report for report in reports}.values())
    # Each report serialized once: its size cuts the pages, its bytes feed the digest.
    pages: list[tuple[list[dict[str, Any]], Any]] = []
    size = 0
    for report in last:
        body = orjson.dumps(report, default=str, option=orjson.OPT_SORT_KEYS)
        if not pages or size + len(body) > PAGE_MAX_BYTES:
            pages.append(([], hashlib.blake2b(digest_size=12)))
            size = 0
        pages[-1][0].append(report)
        pages[-1][1].update(body)
        size += len(body)
    recorded_at, saved = utcnow(), save_stamp()
    return [
        {
            "_id": f"{workflow_id}:{digest.hexdigest()}",
            "workflow_id": workflow_id,
            "stream_id": stream_id,
            "recorded_at": recorded_at,
            "saved": saved,
            "reports": page,
        }
        for page, digest in pages
    ]


def node_report_write(
    workflow_id: str,
    report: NodeReport,
    *,
    input: Any = None,
    output: Any = None,
    extra: dict[str, Any] | None = None,
) -> ReportToPage:
    """The write ``RunArchive.save_node_report`` makes, as a bulk request.

    ``extra``: more fields to store (a node's end stores ``stream_id`` and
    ``trace``, see ``spindle.shared.store.run_trace.NodeFinished``).
    """
    fields = node_report_fields(workflow_id, report, input=input, output=output)
    if extra:
        fields.update(storable(extra))
    stream_id = str(fields.get("stream_id") or workflow_id)
    fields.update(key=node_report_id(workflow_id, report), stream_id=stream_id)
    return ReportToPage(workflow_id, stream_id, fields)


def node_report_fields(
    workflow_id: str, report: NodeReport, *, input: Any = None, output: Any = None
) -> dict[str, Any]:
    """What a node report document holds besides its ``_id`` and ``recorded_at``."""
    fields: dict[str, Any] = storable(report.model_dump(mode="json"))
    fields.update(workflow_id=workflow_id, input=storable(input), output=storable(output))
    return fields
