"""The items of a ``map`` node, by reference: input pages and result pages in MongoDB.

A map's list can hold 10,000 items and more; Temporal's history must not. The
``plan_items`` activity stores the list as pages of ``Settings.item_batch_size``
items, each batch activity reads its page and stores its page of results, and
``collect_items`` reads the results back in order (see docs/graphs/node-types.md).

A page is a JSON blob (``item_blobs`` header, chunks in ``item_blob_chunks``,
``spindle.shared.store.chunked_blobs``), so no item size runs into MongoDB's 16 MB
document limit. Blobs are named ``<run key>/<kind>/<page>``; every attempt writes
its chunks under a name of its own and the header, written last, points at the
newest attempt, so a retried batch replaces its results and never adds to them,
and an older attempt finishing late never replaces a newer one's.

Pages are not kept for ever: ``spindle archive prune`` deletes those of the runs
it prunes and every page stored before its cut-off (``ItemStore.prune``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson
from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from spindle.shared.store.archive import utcnow
from spindle.shared.store.chunked_blobs import BlobIncomplete, ChunkStore, one_piece

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

HEADERS_COLLECTION = "item_blobs"
CHUNKS_COLLECTION = "item_blob_chunks"
INPUT = "in"
RESULTS = "out"
STATE = "state"
# Pages deleted per round trip when pruning (bounded ``$in`` lists).
PRUNE_BATCH = 500


class ItemPageMissing(BlobIncomplete):
    """A page a map needs is not stored (deleted, or never planned)."""


def items_key(workflow_id: str, run_id: str, node_id: str, visit: int) -> str:
    """The key of one execution of a map node: its pages are named under it."""
    return f"{workflow_id}/{run_id}/{node_id}/{visit}"


class ItemStore:
    """Pages of items and of item results, by map execution and page number."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._headers = database[HEADERS_COLLECTION]
        self._chunks = ChunkStore(database[CHUNKS_COLLECTION])

    async def ensure_indexes(self) -> None:
        """The indexes the reads use (idempotent)."""
        await self._chunks.ensure_indexes()
        await self._headers.create_index(
            [("key", ASCENDING), ("kind", ASCENDING), ("page", ASCENDING)], name="key_kind_page"
        )

    async def put(
        self,
        key: str,
        kind: str,
        page: int,
        value: Any,
        *,
        attempt: int = 1,
        counts: dict[str, int] | None = None,
    ) -> int:
        """Store ``value`` as page ``page`` of ``kind``; returns its size in bytes.

        Args:
            key: the map execution (``items_key``).
            kind: ``INPUT``, ``RESULTS`` or ``STATE``.
            page: the page number.
            value: any JSON value.
            attempt: the writing activity's attempt; a later attempt replaces the page.
            counts: small numbers kept on the header (results: succeeded, failed).
        """
        name = f"{key}/{kind}/{page}"
        files_id = f"{name}@{attempt}"
        blob = orjson.dumps(value)
        # No attempt writes twice (a retry is the next attempt), so these chunks are new.
        stored = await self._chunks.write(files_id, one_piece(blob))
        header = {
            "_id": name,
            "key": key,
            # What ``prune`` finds the pages of a pruned run by.
            "workflow_id": key.split("/", 1)[0],
            "kind": kind,
            "page": page,
            "attempt": attempt,
            "files_id": files_id,
            "length": stored.length,
            "counts": counts or {},
            "stored_at": utcnow(),
        }
        previous = None
        # Only over an older attempt: a timed-out attempt that finishes after its
        # retry must not replace the retry's page (MongoDB refuses the upsert with a
        # duplicate key; the nx-27017 wire server ignores it).
        with contextlib.suppress(DuplicateKeyError):
            previous = await self._headers.find_one_and_replace(
                {"_id": name, "attempt": {"$lte": attempt}}, header, upsert=True
            )
        if previous is not None and previous.get("files_id") != files_id:
            await self._chunks.delete(previous["files_id"])
        current = await self._headers.find_one({"_id": name}, projection={"files_id": 1})
        if current is None or current.get("files_id") != files_id:
            await self._chunks.delete(files_id)  # a newer attempt's page stands
        return stored.length

    async def get(self, key: str, kind: str, page: int) -> Any:
        """The value of a page.

        Raises:
            ItemPageMissing: no such page.
        """
        name = f"{key}/{kind}/{page}"
        header = await self._headers.find_one({"_id": name})
        if header is None:
            raise ItemPageMissing(f"item page {name} is not stored")
        blob = await self._chunks.read_all(header["files_id"], length=header["length"])
        return orjson.loads(blob)

    async def counts(self, key: str, kind: str) -> list[dict[str, int]]:
        """The counts of every stored page of ``kind``, in page order."""
        cursor = self._headers.find(
            {"key": key, "kind": kind}, projection={"counts": 1, "page": 1}
        ).sort("page", ASCENDING)
        return [doc.get("counts") or {} async for doc in cursor]

    async def prune(
        self,
        *,
        stored_before: datetime,
        workflow_ids: Sequence[str] = (),
        dry_run: bool = False,
    ) -> int:
        """Delete the pages stored before ``stored_before`` and every page of
        ``workflow_ids``; returns how many pages (counted only with ``dry_run``).

        Only ``find`` with a range or ``$in`` and ``delete_many`` with ``$in``, in
        bounded batches: works on MongoDB and on the nx-27017 wire server alike.
        """
        files: dict[str, str] = {}  # page name → its chunks' files_id
        old = self._headers.find({"stored_at": {"$lt": stored_before}}, {"files_id": 1})
        files.update({str(doc["_id"]): doc["files_id"] async for doc in old})
        for start in range(0, len(workflow_ids), PRUNE_BATCH):
            ids = list(workflow_ids[start : start + PRUNE_BATCH])
            of_runs = self._headers.find({"workflow_id": {"$in": ids}}, {"files_id": 1})
            files.update({str(doc["_id"]): doc["files_id"] async for doc in of_runs})
        if dry_run:
            return len(files)
        names = list(files)
        for start in range(0, len(names), PRUNE_BATCH):
            batch = names[start : start + PRUNE_BATCH]
            # Chunks first: a page is only gone once nothing of it is left behind.
            chunks = {"files_id": {"$in": [files[name] for name in batch]}}
            await self._chunks.collection.delete_many(chunks)
            await self._headers.delete_many({"_id": {"$in": batch}})
        return len(files)

    async def delete(self, key: str) -> int:
        """Remove every page of a map execution; returns how many there were."""
        removed = 0
        async for header in self._headers.find({"key": key}, projection={"files_id": 1}):
            await self._chunks.delete(header["files_id"])
            removed += 1
        await self._headers.delete_many({"key": key})
        return removed


__all__ = [
    "INPUT",
    "RESULTS",
    "STATE",
    "ItemPageMissing",
    "ItemStore",
    "items_key",
]
