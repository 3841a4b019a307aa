"""Archive pages the archiver keeps open across its batches.

Each archiver batch used to insert a page of messages per stream and a page of
node reports per run. Under load the batches are short: every ``finish_run``
waits for its run's writes, which ends the batch at once, so a three-node run
left a page for almost every node (2.5 MongoDB documents a node,
docs/benchmarks.md). Instead, the last page of each stream and of each run stays
open, and a later batch's entries are added to it until it is full: a short run
is its run document, one message page and one report page.

A page is inserted by the batch that opens it (an insert costs the database less
than an upsert); a later batch adds its entries with ``$set`` of one field per
entry (``by_seq.<seq>``, ``by_key.<digest of the report's key and attempt>``),
not ``$push``:

- a batch written again onto the same page sets the same fields, so nothing
  is doubled;
- nx-27017 stores subdocuments ``$push``-ed onto an existing array as JSON
  strings (see the differences listed in ``spindle.shared.store.archive``).

Which page is open, and how full, is a ``PageState`` per stream and per run that
the archive outbox keeps in Redis: it reads those of a batch before writing it
and saves the new ones in the script that takes the batch off the queue. Any
worker's archiver that drains the outbox next goes on with the same pages, and
a batch that did not reach MongoDB, or was not taken off the queue, is planned
again from the states before it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias, TypeVar

import orjson
from pymongo import InsertOne, UpdateOne

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

# A string: subscripting pymongo's generic requests at import time touches a lock
# the workflow sandbox restricts (spindle.shared.store.archive says the same).
PageWrite: TypeAlias = "InsertOne[dict[str, Any]] | UpdateOne"

_T = TypeVar("_T")
_last_stamp = 0


def save_stamp() -> int:
    """Microseconds since the epoch, rising within a process: two saves of one
    report in a millisecond (MongoDB's date precision) still fold in order."""
    global _last_stamp
    _last_stamp = max(time.time_ns() // 1000, _last_stamp + 1)
    return _last_stamp


def message_slot(stream_id: str) -> str:
    """The name of a stream's open message page among the states."""
    return f"m:{stream_id}"


def report_slot(workflow_id: str, stream_id: str) -> str:
    """The name of a run's open report page among the states (per stream too, as
    the page names the stream it is pruned with; a JSON pair: no two pairs meet)."""
    return "r:" + orjson.dumps([workflow_id, stream_id]).decode()


def report_field(key: str, attempt: int) -> str:
    """The field of an open report page that holds attempt ``attempt`` of the
    report saved under ``key`` (a digest: a key may hold dots, which a field
    path cannot). The same attempt saved again replaces its entry; a later
    attempt is an entry of its own, which the fold prefers."""
    return hashlib.blake2b(f"{key}#{attempt}".encode(), digest_size=10).hexdigest()


@dataclass
class PageState:
    """Which page of a stream or run is open, and how full it is."""

    id: str
    entries: int = 0
    size: int = 0
    """Bytes of its entries."""

    def has_room(self, size: int, max_entries: int, max_bytes: int) -> bool:
        if self.entries == 0:
            return True  # an entry larger than a page still gets one
        return self.entries < max_entries and self.size + size <= max_bytes

    def dumps(self) -> bytes:
        return orjson.dumps({"id": self.id, "n": self.entries, "b": self.size})

    @classmethod
    def loads(cls, raw: bytes | str | None) -> PageState | None:
        """The state saved by ``dumps``; None for none (or one unreadable, which
        only costs a new page)."""
        if not raw:
            return None
        try:
            fields = orjson.loads(raw)
            return cls(id=str(fields["id"]), entries=int(fields["n"]), size=int(fields["b"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


class OpenPages:
    """The writes of one archiver batch onto the open pages, planned from their
    states before it.

    Args:
        known: the states of the batch's streams and runs (``message_slot``,
            ``report_slot``); a missing one starts a new page.
        max_entries: entries a page holds at most.
        max_bytes: a page is full at about this many bytes of entries.
    """

    def __init__(
        self,
        known: Mapping[str, PageState] | None = None,
        *,
        max_entries: int = PAGE_MAX_MESSAGES,
        max_bytes: int = OPEN_PAGE_MAX_BYTES,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._known = dict(known or {})
        self.staged: dict[str, PageState] = {}
        """The states once this batch is in MongoDB (save them then, not before)."""
        # New pages' ids carry it: a batch planned again opens pages of its own
        # rather than adding to one a state no longer counts.
        self._stamp = save_stamp()
        self._new: set[str] = set()

    def message_writes(self, stream_id: str, entries: Sequence[dict[str, Any]]) -> list[PageWrite]:
        """Writes adding a batch's messages of one stream (``{seq, ts, raw, …}``,
        each seq once: the first given) to its open page, then to new ones.

        Raises:
            ValueError: the stream was planned already (one call per stream: the
                new pages are inserts, which an unordered bulk cannot order
                before an update).
        """
        ordered = sorted({int(e["seq"]): e for e in reversed(entries)}.items())
        groups = self._place(
            message_slot(stream_id),
            [(entry, len(entry["raw"])) for _, entry in ordered],
            lambda entry: f"{stream_id}:{entry['seq']:012d}:{self._stamp}",
        )
        writes: list[PageWrite] = []
        for page, added in groups:
            first, last = added[0]["seq"], added[-1]["seq"]
            if page.id in self._new:
                # A page this batch opens: an insert (cheaper for the database than
                # an upsert; written again, it is a duplicate key, ignored).
                by_seq = {str(entry["seq"]): entry for entry in added}
                doc = {"_id": page.id, "stream_id": stream_id, "by_seq": by_seq}
                writes.append(InsertOne({**doc, "first_seq": first, "last_seq": last}))
                continue
            update = {
                "$set": {f"by_seq.{entry['seq']}": entry for entry in added},
                "$min": {"first_seq": first},
                "$max": {"last_seq": last},
                "$setOnInsert": {"stream_id": stream_id},
            }
            writes.append(UpdateOne({"_id": page.id}, update, upsert=True))
        return writes

    def report_writes(
        self, workflow_id: str, stream_id: str, reports: Sequence[dict[str, Any]]
    ) -> list[PageWrite]:
        """Writes adding a batch's node reports of one run (each with its ``key``;
        a key given twice: the last) to the run's open page, then to new ones
        (one call per run, as ``message_writes``).

        Each entry carries ``saved``, the microseconds of its save:
        ``RunArchive.node_reports`` folds the saves of a key in that order, the
        first one's time being the report's ``recorded_at``.
        """
        named = [
            (report_field(key, int(report.get("attempt") or 1)), {**report, "saved": self._stamp})
            for key, report in {str(r["key"]): r for r in reports}.items()
        ]
        groups = self._place(
            report_slot(workflow_id, stream_id),
            [(item, len(orjson.dumps(item[1], default=str))) for item in named],
            lambda _: f"{workflow_id}:{self._stamp}:{len(self._new) + 1}",
        )
        writes: list[PageWrite] = []
        for page, items in groups:
            by_key = dict(items)
            run = {"workflow_id": workflow_id, "stream_id": stream_id}
            if page.id in self._new:
                writes.append(InsertOne({"_id": page.id, **run, "by_key": by_key}))
                continue
            fields = {f"by_key.{name}": entry for name, entry in by_key.items()}
            update = {"$set": fields, "$setOnInsert": run}
            writes.append(UpdateOne({"_id": page.id}, update, upsert=True))
        return writes

    def _place(
        self, slot: str, sized: Sequence[tuple[_T, int]], new_id: Callable[[_T], str]
    ) -> list[tuple[PageState, list[_T]]]:
        """Entries (with their sizes) by the page each goes on: the slot's open
        page while it has room, then new pages (named by ``new_id`` of their first)."""
        page = self._current(slot)
        groups: list[tuple[PageState, list[_T]]] = []
        for item, size in sized:
            if page is None or not page.has_room(size, self.max_entries, self.max_bytes):
                page = self._open(new_id(item))
            if not groups or groups[-1][0] is not page:
                groups.append((page, []))
            groups[-1][1].append(item)
            page.entries += 1
            page.size += size
        if page is not None:
            self.staged[slot] = page
        return groups

    def _current(self, slot: str) -> PageState | None:
        if slot in self.staged:
            raise ValueError(f"{slot} is planned already in this batch")
        page = self._known.get(slot)
        # A copy: the states given stay as they were.
        return replace(page) if page else None

    def _open(self, page_id: str) -> PageState:
        self._new.add(page_id)
        return PageState(id=page_id)


__all__ = [
    "OPEN_PAGE_MAX_BYTES",
    "PAGE_MAX_BYTES",
    "PAGE_MAX_MESSAGES",
    "OpenPages",
    "PageState",
    "PageWrite",
    "message_slot",
    "report_field",
    "report_slot",
    "save_stamp",
]
