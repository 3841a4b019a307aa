"""Files of a run (uploads and artifacts) in MongoDB, per tenant.

Laid out like GridFS (a header per file, its content in chunk documents of at
most 255 KiB read back in order) but in ordinary collections, ``run_files`` and
``run_file_chunks``: ``GridFSBucket`` does not work on the nx-27017 wire server
(see ``shared.chunked_blobs``). Header fields: ``tenant_id``, ``workflow_id``,
``name``, ``content_type``, ``length``, ``sha256``, ``uploaded_by``,
``uploaded_at``; ``_id`` is a time-ordered id, so the newest upload of a name
wins and is the one served.

Every query names the tenant: another tenant's file is reported exactly as an
unknown one. Uploads are streamed chunk by chunk; a file becomes visible only
when all its chunks are stored, and a failed, oversized or cancelled upload
leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import re
import secrets
import time
import unicodedata
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pymongo import ASCENDING, DESCENDING

from shared.archive import as_utc, utcnow
from shared.chunked_blobs import ChunkStore
from shared.errors import NotFound, PayloadTooLarge, ValidationFailed
from shared.mongo import mongo_client

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from shared.settings import Settings

FILES_COLLECTION = "run_files"
CHUNKS_COLLECTION = "run_file_chunks"
MAX_NAME_BYTES = 255
DEFAULT_CONTENT_TYPE = "application/octet-stream"
# type/subtype with RFC 9110 token characters and optional parameters; nothing else.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_CONTENT_TYPE = re.compile(
    rf"^{_TOKEN}/{_TOKEN}(\s*;\s*{_TOKEN}=({_TOKEN}|\"[^\"\\\x00-\x1f\x7f]*\"))*$"
)
MAX_CONTENT_TYPE = 255
# Bidirectional overrides and isolates disguise a name's extension ("exe.txt"
# shown for "txt.exe"); other format characters (ZWJ in emoji) are fine.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class StoredFile(BaseModel):
    """What is known of one stored file."""

    file_id: str
    tenant_id: str
    workflow_id: str
    name: str
    content_type: str
    size: int
    sha256: str
    uploaded_by: str | None = None
    uploaded_at: datetime


def _refuse(rule: str, message: str, value: str) -> ValidationFailed:
    return ValidationFailed(
        f"file name {message}",
        errors=[{"field": "name", "rule": rule, "message": f"{message}; got {value!r}"}],
    )


def safe_file_name(name: str) -> str:
    """``name`` if it is a safe file name (NFC-normalised), else refuse it.

    Refused: empty, ``.`` and ``..``, any ``/`` or ``\\``, NUL and other control
    characters, bidirectional overrides, leading or trailing whitespace, and
    more than 255 bytes of UTF-8. Unicode names are kept.

    Raises:
        ValidationFailed: naming field ``name`` and the rule broken.
    """
    if not name:
        raise _refuse("not_empty", "must not be empty", name)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _refuse("utf8", "must be valid UTF-8 text", name) from exc
    name = unicodedata.normalize("NFC", name)
    if name in (".", ".."):
        raise _refuse("not_dot", "must not be '.' or '..'", name)
    if "/" in name or "\\" in name:
        raise _refuse("no_path_separator", "must not contain '/' or '\\'", name)
    if any(unicodedata.category(ch) == "Cc" or ch in _BIDI_CONTROLS for ch in name):
        raise _refuse("no_control_characters", "must not contain control characters", name)
    if name != name.strip():
        raise _refuse("no_surrounding_whitespace", "must not start or end with whitespace", name)
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise _refuse("max_bytes", f"must be at most {MAX_NAME_BYTES} bytes of UTF-8", name)
    return name


def safe_content_type(value: str | None) -> str:
    """A well-formed media type (lower-cased type/subtype), else ``application/octet-stream``."""
    if not value or len(value) > MAX_CONTENT_TYPE or not _CONTENT_TYPE.match(value.strip()):
        return DEFAULT_CONTENT_TYPE
    media, _, params = value.strip().partition(";")
    return media.lower() + (f";{params}" if params else "")


def new_file_id() -> str:
    """24 hex digits that sort by creation time (ns), then at random."""
    return f"{time.time_ns():016x}{secrets.token_hex(4)}"


def _stored(doc: dict[str, Any]) -> StoredFile:
    return StoredFile(
        file_id=doc["_id"],
        tenant_id=doc["tenant_id"],
        workflow_id=doc["workflow_id"],
        name=doc["name"],
        content_type=doc["content_type"],
        size=int(doc["length"]),
        sha256=doc["sha256"],
        uploaded_by=doc.get("uploaded_by"),
        uploaded_at=as_utc(doc["uploaded_at"]),
    )


class FileStore:
    """A run's files; every file carries tenant, run and name.

    Args:
        database: the Mongo database holding ``run_files`` and ``run_file_chunks``.
        owns_client: ``close()`` closes the database's client (``from_settings``).
    """

    def __init__(
        self, database: AsyncDatabase[dict[str, Any]], *, owns_client: bool = False
    ) -> None:
        self._db = database
        self._owns_client = owns_client
        self.files = database[FILES_COLLECTION]
        self.chunks = ChunkStore(database[CHUNKS_COLLECTION])
        self._indexes_ready = False

    @classmethod
    def from_settings(cls, settings: Settings) -> FileStore:
        """A store with a client of its own (closed by ``close()``)."""
        client = mongo_client(settings, appname="spindle-files")
        return cls(client[settings.mongo_db], owns_client=True)

    async def close(self) -> None:
        if self._owns_client:
            await self._db.client.close()

    async def ensure_indexes(self) -> None:
        """Create the indexes (idempotent); ``put`` does it once by itself."""
        await self.files.create_index(
            [("tenant_id", ASCENDING), ("workflow_id", ASCENDING), ("name", ASCENDING)],
            name="tenant_run_name",
        )
        await self.chunks.ensure_indexes()
        self._indexes_ready = True

    async def put(
        self,
        *,
        tenant_id: str,
        workflow_id: str,
        name: str,
        content_type: str,
        chunks: AsyncIterator[bytes],
        max_bytes: int,
        uploaded_by: str | None,
    ) -> StoredFile:
        """Store a file, streaming ``chunks``; it replaces an older file of that name.

        Raises:
            ValidationFailed: ``name`` is not a safe file name.
            PayloadTooLarge: the content is longer than ``max_bytes`` (nothing is kept).
        """
        name = safe_file_name(name)
        if not self._indexes_ready:
            await self.ensure_indexes()
        file_id = new_file_id()
        try:
            content = await self.chunks.write(file_id, chunks, max_bytes=max_bytes)
        except PayloadTooLarge as exc:
            raise PayloadTooLarge(
                f"file '{name}' is larger than the limit of {max_bytes} bytes"
            ) from exc
        doc = {
            "_id": file_id,
            "tenant_id": tenant_id,
            "workflow_id": workflow_id,
            "name": name,
            "content_type": safe_content_type(content_type),
            "length": content.length,
            "chunk_size": self.chunks.chunk_size,
            "sha256": content.sha256,
            "uploaded_by": uploaded_by,
            "uploaded_at": utcnow(),
        }
        try:
            await self.files.insert_one(doc)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.chunks.delete(file_id))
            raise
        await self._drop_superseded(tenant_id, workflow_id, name)
        return _stored(doc)

    async def _drop_superseded(self, tenant_id: str, workflow_id: str, name: str) -> None:
        """Delete every version of a name but the newest (possibly a concurrent upload's)."""
        cursor = self.files.find(
            {"tenant_id": tenant_id, "workflow_id": workflow_id, "name": name},
            projection={"_id": 1},
        ).sort("_id", DESCENDING)
        versions = [doc["_id"] async for doc in cursor]
        for old in versions[1:]:
            # Header first: from then on nobody starts reading the old chunks.
            await self.files.delete_one({"_id": old})
            await self.chunks.delete(old)

    async def list(self, *, tenant_id: str, workflow_id: str) -> builtins.list[StoredFile]:
        """A run's files (newest version of each name), by name."""
        cursor = self.files.find({"tenant_id": tenant_id, "workflow_id": workflow_id}).sort(
            [("name", ASCENDING), ("_id", DESCENDING)]
        )
        newest: dict[str, StoredFile] = {}
        async for doc in cursor:
            newest.setdefault(doc["name"], _stored(doc))
        return [newest[name] for name in sorted(newest)]

    async def get(self, *, tenant_id: str, workflow_id: str, name: str) -> StoredFile:
        """The newest file of that name.

        Raises:
            NotFound: no such file for this tenant and run (another tenant's
                file is reported the same way).
        """
        key = unicodedata.normalize("NFC", name)
        cursor = (
            self.files.find({"tenant_id": tenant_id, "workflow_id": workflow_id, "name": key})
            .sort("_id", DESCENDING)
            .limit(1)
        )
        async for doc in cursor:
            return _stored(doc)
        raise NotFound(f"file '{name}' not found in run '{workflow_id}'")

    async def open(self, stored: StoredFile) -> AsyncIterator[bytes]:
        """The file's content, chunk by chunk.

        Raises:
            BlobIncomplete: the file was replaced or deleted while being read.
        """
        async for piece in self.chunks.read(stored.file_id, length=stored.size):
            yield piece


__all__ = [
    "FileStore",
    "StoredFile",
    "new_file_id",
    "safe_content_type",
    "safe_file_name",
]
