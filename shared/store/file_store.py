"""Files of a run (uploads and artifacts) in MongoDB, per tenant.

Laid out like GridFS (a header per file, its content in chunk documents of at
most 255 KiB read back in order) but in ordinary collections, ``run_files`` and
``run_file_chunks``: ``GridFSBucket`` does not work on the nx-27017 wire server
(see ``spindle.shared.store.chunked_blobs``). Header fields: ``tenant_id``, ``workflow_id``,
``name``, ``content_type``, ``length``, ``sha256``, ``uploaded_by``,
``uploaded_at``; ``_id`` is a time-ordered id, so the newest upload of a name
wins and is the one served. Names are single file names (``safe_file_name``,
what REST uploads take) or artifact paths of several such segments
(``safe_artifact_path``: ``out/result.md``, ``files/ws-1/result.md``, what runs
and workstreams write; a child's are copied to its parent by ``copy_file``).

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

from spindle.shared.contracts.errors import NotFound, PayloadTooLarge, ValidationFailed
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.store.archive import as_utc, utcnow
from spindle.shared.store.chunked_blobs import ChunkStore, one_piece

if TYPE_CHECKING:
    from pymongo.asynchronous.database import AsyncDatabase

    from spindle.shared.platform.settings import Settings

FILES_COLLECTION = "run_files"
CHUNKS_COLLECTION = "run_file_chunks"
MAX_NAME_BYTES = 255
# A whole artifact path (``files/ws-1/report.md``): segments of MAX_NAME_BYTES each.
MAX_PATH_BYTES = 1024
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
    name = _nfc_text(name)
    if name not in (".", "..") and ("/" in name or "\\" in name):
        raise _refuse("no_path_separator", "must not contain '/' or '\\'", name)
    return _check_segment(name, name)


def safe_artifact_path(name: str) -> str:
    """``name`` if it is a safe artifact path (NFC-normalised), else refuse it.

    An artifact path is one or more segments joined by ``/`` (``out/result.md``,
    ``files/ws-1/result.md``); each segment obeys ``safe_file_name``'s rules.
    Refused besides: a leading or trailing ``/`` and empty segments (``a//b``),
    ``.`` and ``..`` segments (``files/../x``), any ``\\``, and more than
    1024 bytes of UTF-8 in all.

    Raises:
        ValidationFailed: naming field ``name`` and the rule broken.
    """
    name = _nfc_text(name)
    if "\\" in name:
        raise _refuse("no_path_separator", "must not contain '\\'", name)
    if len(name.encode("utf-8")) > MAX_PATH_BYTES:
        raise _refuse("max_bytes", f"must be at most {MAX_PATH_BYTES} bytes of UTF-8", name)
    segments = name.split("/")
    if len(segments) > 1 and any(segment == "" for segment in segments):
        raise _refuse("no_empty_segment", "must not start or end with '/' nor contain '//'", name)
    for segment in segments:
        _check_segment(segment, name)
    return name


def _nfc_text(name: str) -> str:
    if not name:
        raise _refuse("not_empty", "must not be empty", name)
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _refuse("utf8", "must be valid UTF-8 text", name) from exc
    return unicodedata.normalize("NFC", name)


def _check_segment(segment: str, whole: str) -> str:
    """One file name (or one segment of a path); errors quote ``whole``."""
    if not segment:
        raise _refuse("not_empty", "must not be empty", whole)
    if segment in (".", ".."):
        raise _refuse("not_dot", "must not be '.' or '..'", whole)
    if any(unicodedata.category(ch) == "Cc" or ch in _BIDI_CONTROLS for ch in segment):
        raise _refuse("no_control_characters", "must not contain control characters", whole)
    if segment != segment.strip():
        raise _refuse("no_surrounding_whitespace", "must not start or end with whitespace", whole)
    if len(segment.encode("utf-8")) > MAX_NAME_BYTES:
        raise _refuse("max_bytes", f"must be at most {MAX_NAME_BYTES} bytes of UTF-8", whole)
    return segment


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

        ``name`` may be an artifact path (``out/result.md``); uploads over REST
        keep to single names (``safe_file_name``) before they get here.

        Raises:
            ValidationFailed: ``name`` is not a safe artifact path.
            PayloadTooLarge: the content is longer than ``max_bytes`` (nothing is kept).
        """
        name = safe_artifact_path(name)
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

    async def put_bytes(
        self,
        *,
        tenant_id: str,
        workflow_id: str,
        name: str,
        data: bytes,
        content_type: str = DEFAULT_CONTENT_TYPE,
        uploaded_by: str | None = None,
    ) -> StoredFile:
        """``put`` of content already in memory (an artifact a run writes)."""
        return await self.put(
            tenant_id=tenant_id,
            workflow_id=workflow_id,
            name=name,
            content_type=content_type,
            chunks=one_piece(data),
            max_bytes=len(data),
            uploaded_by=uploaded_by,
        )

    async def copy_file(
        self,
        tenant_id: str,
        from_workflow_id: str,
        name: str,
        to_workflow_id: str,
        new_name: str,
    ) -> StoredFile:
        """Copy one file of a run to another run of the same tenant, under ``new_name``.

        Idempotent for a retried activity: a copy replaces an older file of
        ``new_name`` (same content, same result but the id and time).

        Raises:
            NotFound: no file ``name`` in ``from_workflow_id`` for this tenant.
            ValidationFailed: ``new_name`` is not a safe artifact path.
        """
        new_name = safe_artifact_path(new_name)
        source = await self.get(tenant_id=tenant_id, workflow_id=from_workflow_id, name=name)
        return await self.put(
            tenant_id=tenant_id,
            workflow_id=to_workflow_id,
            name=new_name,
            content_type=source.content_type,
            chunks=self.open(source),
            max_bytes=source.size,
            uploaded_by=source.uploaded_by,
        )

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

    async def list(
        self, *, tenant_id: str, workflow_id: str, prefix: str | None = None
    ) -> builtins.list[StoredFile]:
        """A run's files (newest version of each name), by name.

        Args:
            prefix: only names that start with it (e.g. ``out/``).
        """
        cursor = self.files.find({"tenant_id": tenant_id, "workflow_id": workflow_id}).sort(
            [("name", ASCENDING), ("_id", DESCENDING)]
        )
        newest: dict[str, StoredFile] = {}
        async for doc in cursor:
            if prefix is None or doc["name"].startswith(prefix):
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

    async def delete(self, *, tenant_id: str, workflow_id: str, name: str) -> StoredFile:
        """Remove every version of a file; the newest is returned (what was removed).

        Header first, then chunks: a reader already streaming it gets
        ``BlobIncomplete``, a later ``get`` a ``NotFound``.

        Raises:
            NotFound: no such file for this tenant and run.
        """
        stored = await self.get(tenant_id=tenant_id, workflow_id=workflow_id, name=name)
        cursor = self.files.find(
            {"tenant_id": tenant_id, "workflow_id": workflow_id, "name": stored.name},
            projection={"_id": 1},
        )
        for file_id in [doc["_id"] async for doc in cursor]:
            await self.files.delete_one({"_id": file_id})
            await self.chunks.delete(file_id)
        return stored

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
    "safe_artifact_path",
    "safe_content_type",
    "safe_file_name",
]
