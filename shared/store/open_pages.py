"""Archive pages the archiver keeps open across its batches.

Each archiver batch used to insert a page of messages per stream and a page of
node reports per run. Under load the batches are short: every ``finish_run``
waits for its run's writes, which ends the batch at once, so a three-node run
left a page for almost every node (2.5 MongoDB documents a node,
docs/benchmarks.md). The archiver's ``OpenPages`` keeps the last page of each
stream and of each run open instead, and adds a later batch's entries to it
until it is full: a short run is its run document, one message page and one
report page.

An entry is added with ``$set`` of one field per entry (``by_seq.<seq>``,
``by_key.<digest of the report's key>``), not ``$push``:

- a batch written again (an outbox replay) sets the same fields, so nothing
  is doubled;
- nx-27017 stores subdocuments ``$push``-ed onto an existing array as JSON
  strings (see the differences listed in ``spindle.shared.store.archive``).

Only the process that opened a page adds to it: page ids carry a token of this
``OpenPages``. A drainer that takes the outbox's lock over opens its own pages,
so the entry and byte counts kept here are exact, and a page never outgrows
``PAGE_MAX_MESSAGES`` entries or about ``OPEN_PAGE_MAX_BYTES``. What is staged
for a batch becomes the open pages only once MongoDB has taken the whole batch
(``commit``); a batch that failed is planned again from the pages before it.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from pymongo import UpdateOne

PAGE_MAX_MESSAGES = 500
"""Most entries (messages, or node reports) one page holds."""
PAGE_MAX_BYTES = 4 * 1024 * 1024
"""A page closes at this many bytes of raw messages (a message is never split, and
one is at most ``Settings.max_message_bytes``), far below MongoDB's 16 MB."""
OPEN_PAGE_MAX_BYTES = 256 * 1024
"""An open page is full at about this many bytes of entries, a sixteenth of an
inserted page's: every add rewrites the whole document (MongoDB stores a new
version of it; nx-27017 rewrites its JSON), so a smaller page bounds what one
batch costs the database."""
MAX_OPEN_PAGES = 4096
"""Pages kept open per process, least recently written dropped first (a dropped
stream's or run's next entries start a new page)."""

_last_stamp = 0


def save_stamp() -> int:
    """Microseconds since the epoch, rising within a process: two saves of one
    report in a millisecond (MongoDB's date precision) still fold in order."""
    global _last_stamp
    _last_stamp = max(time.time_ns() // 1000, _last_stamp + 1)
    return _last_stamp


def report_field(key: str) -> str:
    """The field of an open report page that holds the report saved under ``key``
    (a digest: a key may hold dots, which a field path cannot)."""
    return hashlib.blake2b(key.encode(), digest_size=10).hexdigest()


@dataclass
class _Page:
    id: str
    entries: int = 0
    bytes: int = 0
    first_saved: dict[str, int] = field(default_factory=dict)
    """Report pages: each field's first save (µs), kept when a later save replaces it."""

    def has_room(self, size: int, max_entries: int, max_bytes: int) -> bool:
        if self.entries == 0:
            return True  # an entry larger than a page still gets one
        return self.entries < max_entries and self.bytes + size <= max_bytes


class OpenPages:
    """The pages one archiver process adds to, and the writes that add to them.

    Args:
        max_entries: entries a page holds at most.
        max_bytes: a page is full at about this many bytes of entries.
        max_open: pages kept open, least recently written dropped first.
    """

    def __init__(
        self,
        *,
        max_entries: int = PAGE_MAX_MESSAGES,
        max_bytes: int = OPEN_PAGE_MAX_BYTES,
        max_open: int = MAX_OPEN_PAGES,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_open = max_open
        self._token = uuid.uuid4().hex[:10]
        self._open: OrderedDict[str, _Page] = OrderedDict()
        self._staged: dict[str, _Page] = {}

    def message_writes(self, stream_id: str, entries: Sequence[dict[str, Any]]) -> list[UpdateOne]:
        """Upserts adding a batch's messages of one stream (``{seq, ts, raw, …}``,
        each seq once: the first given) to its open page, then to new ones."""
        ordered = sorted({int(e["seq"]): e for e in reversed(entries)}.items())
        slot = f"m:{stream_id}"
        page = self._current(slot)
        groups: list[tuple[_Page, list[dict[str, Any]]]] = []
        for seq, entry in ordered:
            size = len(entry["raw"])
            if page is None or not page.has_room(size, self.max_entries, self.max_bytes):
                page = _Page(id=f"{stream_id}:{seq:012d}:{self._token}")
            if not groups or groups[-1][0] is not page:
                groups.append((page, []))
            groups[-1][1].append(entry)
            page.entries += 1
            page.bytes += size
        if page is not None:
            self._staged[slot] = page
        return [
            UpdateOne(
                {"_id": page.id},
                {
                    "$set": {f"by_seq.{entry['seq']}": entry for entry in added},
                    "$min": {"first_seq": added[0]["seq"]},
                    "$max": {"last_seq": added[-1]["seq"]},
                    "$setOnInsert": {"stream_id": stream_id},
                },
                upsert=True,
            )
            for page, added in groups
        ]

    def report_writes(
        self, workflow_id: str, stream_id: str, reports: Sequence[dict[str, Any]]
    ) -> list[UpdateOne]:
        """Upserts adding a batch's node reports of one run (each with its ``key``;
        a key given twice: the last) to the run's open page, then to new ones.

        A report saved again replaces the one its page holds (keeping its first
        save time); one whose page is full goes to the next page, and
        ``RunArchive.node_reports`` folds the saves in order.
        """
        saved = save_stamp()
        slot = f"r:{workflow_id}"
        page = self._current(slot)
        groups: list[tuple[_Page, dict[str, dict[str, Any]]]] = []
        for key, report in {str(r["key"]): r for r in reports}.items():
            name = report_field(key)
            size = len(orjson.dumps(report, default=str))
            if page is None or not page.has_room(size, self.max_entries, self.max_bytes):
                page = _Page(id=f"{workflow_id}:{saved}:{self._token}")
            if not groups or groups[-1][0] is not page:
                groups.append((page, {}))
            first = page.first_saved.setdefault(name, saved)
            groups[-1][1][f"by_key.{name}"] = {**report, "saved": saved, "first_saved": first}
            page.entries += 1
            page.bytes += size
        if page is not None:
            self._staged[slot] = page
        return [
            UpdateOne(
                {"_id": page.id},
                {
                    "$set": fields,
                    "$setOnInsert": {"workflow_id": workflow_id, "stream_id": stream_id},
                },
                upsert=True,
            )
            for page, fields in groups
        ]

    def commit(self) -> None:
        """The batch planned since the last ``commit`` is in MongoDB: its pages
        are the open ones."""
        for slot, page in self._staged.items():
            self._open[slot] = page
            self._open.move_to_end(slot)
        self._staged.clear()
        while len(self._open) > self.max_open:
            self._open.popitem(last=False)

    def discard(self) -> None:
        """The planned batch did not (all) reach MongoDB: plan it again from the
        open pages as they were (its writes set the same fields again)."""
        self._staged.clear()

    def _current(self, slot: str) -> _Page | None:
        page = self._staged.get(slot) or self._open.get(slot)
        # A copy: staging must leave the committed page as it was until commit.
        return replace(page, first_saved=dict(page.first_saved)) if page else None


__all__ = [
    "MAX_OPEN_PAGES",
    "OPEN_PAGE_MAX_BYTES",
    "PAGE_MAX_BYTES",
    "PAGE_MAX_MESSAGES",
    "OpenPages",
    "report_field",
    "save_stamp",
]
