"""Large binary content as ordered chunk documents in MongoDB (GridFS's layout).

``GridFSBucket`` does not work on the nx-27017 wire server used in development
and tests: it intercepts every collection named ``*.files`` / ``*.chunks`` and
maps it onto tables of its own, where aborting an upload fails and counting or
deleting chunks by ``files_id`` fails (``no such column``). So Spindle keeps
GridFS's layout in ordinary collections instead: a header document per blob
(owned by the caller: ``store.file_store``, ``temporal.payload_offload``) and
one chunks collection of ``{_id, files_id, n, data}`` documents of at most
``CHUNK_SIZE`` bytes, read back in ``n`` order. The same code runs unchanged on
MongoDB.

A blob is visible only once its caller writes the header, after every chunk
is stored, so a reader never sees half a blob.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING
from pymongo.errors import BulkWriteError

from spindle.shared.contracts.errors import PayloadTooLarge

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection


CHUNK_SIZE = 255 * 1024  # GridFS's default: a chunk and its envelope stay far below 16 MB
WRITE_BATCH = 8  # chunks per insert: about 2 MB a round trip
DUPLICATE_KEY = 11000


class BlobIncomplete(RuntimeError):
    """A blob's chunks are missing or out of order (deleted or replaced while read)."""


@dataclass(frozen=True)
class ChunkedContent:
    """What ``ChunkStore.write`` stored."""

    length: int
    sha256: str
    chunk_count: int


def chunk_id(files_id: str, n: int) -> str:
    return f"{files_id}:{n:07d}"


async def one_piece(data: bytes) -> AsyncIterator[bytes]:
    """``data`` as an async source for ``ChunkStore.write``."""
    yield data


class ChunkStore:
    """The chunks collection: write a stream as chunks, read it back, delete it."""

    def __init__(
        self, collection: AsyncCollection[dict[str, Any]], *, chunk_size: int = CHUNK_SIZE
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        self.collection = collection
        self.chunk_size = chunk_size

    async def ensure_indexes(self) -> None:
        """The ``(files_id, n)`` index that ordered reads use (idempotent)."""
        await self.collection.create_index(
            [("files_id", ASCENDING), ("n", ASCENDING)], name="files_id_n", unique=True
        )

    async def write(
        self,
        files_id: str,
        source: AsyncIterable[bytes],
        *,
        max_bytes: int | None = None,
        clean_up_on_error: bool = True,
    ) -> ChunkedContent:
        """Store ``source`` as the chunks of ``files_id``, streaming.

        Writing the same chunks again is a no-op (chunk ids are deterministic).

        Args:
            files_id: the blob's id.
            source: its bytes, in pieces of any size.
            max_bytes: refuse content longer than this.
            clean_up_on_error: on any failure delete the chunks written so far.
                Content-addressed callers pass False: another writer may be
                storing the very same chunks.

        Raises:
            PayloadTooLarge: the content is longer than ``max_bytes``.
        """
        digest = hashlib.sha256()
        buffer = bytearray()
        pending: list[dict[str, Any]] = []
        length = 0
        n = 0

        async def flush() -> None:
            if pending:
                await self._insert(pending)
                pending.clear()

        def cut(size: int) -> None:
            nonlocal n
            pending.append(
                {
                    "_id": chunk_id(files_id, n),
                    "files_id": files_id,
                    "n": n,
                    "data": bytes(buffer[:size]),
                }
            )
            del buffer[:size]
            n += 1

        try:
            async for piece in source:
                length += len(piece)
                if max_bytes is not None and length > max_bytes:
                    raise PayloadTooLarge(f"content exceeds the limit of {max_bytes} bytes")
                digest.update(piece)
                buffer += piece
                while len(buffer) >= self.chunk_size:
                    cut(self.chunk_size)
                    if len(pending) >= WRITE_BATCH:
                        await flush()
            if buffer:
                cut(len(buffer))
            await flush()
        except BaseException:
            if clean_up_on_error:
                # Shielded: a cancelled upload still removes its partial chunks.
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.delete(files_id))
            raise
        return ChunkedContent(length=length, sha256=digest.hexdigest(), chunk_count=n)

    async def _insert(self, docs: list[dict[str, Any]]) -> None:
        try:
            await self.collection.insert_many(docs, ordered=False)
        except BulkWriteError as exc:
            errors = exc.details.get("writeErrors", [])
            if any(error.get("code") != DUPLICATE_KEY for error in errors):
                raise

    async def read(self, files_id: str, *, length: int) -> AsyncIterator[bytes]:
        """The chunks of ``files_id`` in order.

        Raises:
            BlobIncomplete: a chunk is missing, or the total is not ``length``.
        """
        expected_n = 0
        seen = 0
        cursor = self.collection.find({"files_id": files_id}).sort("n", ASCENDING)
        async for doc in cursor:
            if doc["n"] != expected_n:
                raise BlobIncomplete(f"blob {files_id}: chunk {expected_n} is missing")
            data = bytes(doc["data"])
            seen += len(data)
            expected_n += 1
            yield data
        if seen != length:
            raise BlobIncomplete(f"blob {files_id}: {seen} of {length} bytes stored")

    async def read_all(self, files_id: str, *, length: int) -> bytes:
        """The whole blob in memory (small blobs only)."""
        return b"".join([piece async for piece in self.read(files_id, length=length)])

    async def delete(self, files_id: str) -> int:
        """Remove every chunk of ``files_id``; returns how many there were."""
        result = await self.collection.delete_many({"files_id": files_id})
        return result.deleted_count

    async def count(self, files_id: str) -> int:
        """How many chunks ``files_id`` has (tests, diagnostics)."""
        return await self.collection.count_documents({"files_id": files_id})


__all__ = [
    "CHUNK_SIZE",
    "BlobIncomplete",
    "ChunkStore",
    "ChunkedContent",
    "chunk_id",
    "one_piece",
]
