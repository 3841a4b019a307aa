"""Claim check for Temporal payloads: large ones live in MongoDB, Temporal gets a reference.

Temporal refuses payloads above 2 MB (and a history above 50 MB), and a run's
input, context or a node's output can be bigger. ``OffloadingPayloadCodec``
stores every payload whose serialized size exceeds
``Settings.payload_offload_bytes`` in MongoDB and hands Temporal a small
payload with metadata ``encoding: binary/spindle-offloaded`` whose data is the
reference (``{"sha256": ..., "size": ...}``); decoding fetches it back.

Stored payloads are content-addressed by the SHA-256 of the serialized payload
(metadata and data), so storing one twice is a no-op and retried activities or
replays never duplicate anything. Layout: header documents in
``offloaded_payloads`` (``_id`` = sha256) and their chunks in
``offloaded_payload_chunks`` (see ``spindle.shared.store.chunked_blobs``; GridFS itself does not
work on nx-27017). Nothing deletes them: a history may be replayed at any time.

The codec is built before the event loop in some entry points, so its Mongo
client is created lazily, inside the running loop, on the first payload that
needs it (a new one if it is later used from another loop). Histories without
offloaded payloads never touch MongoDB (e.g. the ``Replayer`` in tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
from pymongo.errors import ConnectionFailure, DuplicateKeyError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from spindle.shared.contracts.errors import SpindleError, Unavailable
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.store.archive import utcnow
from spindle.shared.store.chunked_blobs import ChunkStore, one_piece

if TYPE_CHECKING:
    from pymongo import AsyncMongoClient
    from pymongo.asynchronous.database import AsyncDatabase

    from spindle.shared.platform.settings import Settings

OFFLOADED_ENCODING = b"binary/spindle-offloaded"
PAYLOADS_COLLECTION = "offloaded_payloads"
CHUNKS_COLLECTION = "offloaded_payload_chunks"
RECENT_BYTES = 32 * 1024 * 1024


class OffloadedPayloadMissing(SpindleError):
    """A reference names a payload MongoDB does not have (or has corrupted)."""


class PayloadBlobStore:
    """Serialized payloads in MongoDB, content-addressed by SHA-256."""

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._headers = database[PAYLOADS_COLLECTION]
        self._chunks = ChunkStore(database[CHUNKS_COLLECTION])
        self._indexes_ready = False

    async def put(self, blob: bytes) -> str:
        """Store ``blob`` unless it is stored already; returns its sha256 (hex)."""
        sha = hashlib.sha256(blob).hexdigest()
        if await self._headers.find_one({"_id": sha}, projection={"_id": 1}) is not None:
            return sha
        await self._ensure_indexes()
        # Chunks first, header last: a header always has all its chunks. No
        # clean-up on failure: a concurrent writer may be storing the same chunks.
        await self._chunks.write(sha, one_piece(blob), clean_up_on_error=False)
        # A concurrent writer may have stored the header meanwhile: same content.
        with contextlib.suppress(DuplicateKeyError):
            await self._headers.insert_one(
                {"_id": sha, "length": len(blob), "created_at": utcnow()}
            )
        return sha

    async def get(self, sha: str) -> bytes:
        """The blob stored under ``sha``.

        Raises:
            OffloadedPayloadMissing: unknown, incomplete or corrupted.
        """
        header = await self._headers.find_one({"_id": sha})
        if header is None:
            raise OffloadedPayloadMissing(f"offloaded payload {sha} is not in MongoDB")
        try:
            blob = await self._chunks.read_all(sha, length=int(header["length"]))
        except RuntimeError as exc:
            raise OffloadedPayloadMissing(f"offloaded payload {sha} is incomplete: {exc}") from exc
        if hashlib.sha256(blob).hexdigest() != sha:
            raise OffloadedPayloadMissing(f"offloaded payload {sha} does not match its hash")
        return blob

    async def contains(self, sha: str) -> bool:
        return await self._headers.find_one({"_id": sha}, projection={"_id": 1}) is not None

    async def _ensure_indexes(self) -> None:
        if not self._indexes_ready:
            await self._chunks.ensure_indexes()
            self._indexes_ready = True


class _RecentBlobs:
    """The most recently stored or fetched blobs, up to a byte budget.

    A worker usually decodes what it has just encoded (an activity's result in
    the next workflow activation): this saves the round trip to MongoDB.
    """

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._size = 0
        self._blobs: OrderedDict[str, bytes] = OrderedDict()

    def get(self, sha: str) -> bytes | None:
        blob = self._blobs.get(sha)
        if blob is not None:
            self._blobs.move_to_end(sha)
        return blob

    def add(self, sha: str, blob: bytes) -> None:
        if len(blob) > self._budget or sha in self._blobs:
            return
        self._blobs[sha] = blob
        self._size += len(blob)
        while self._size > self._budget:
            _, dropped = self._blobs.popitem(last=False)
            self._size -= len(dropped)


def is_offloaded(payload: Payload) -> bool:
    return payload.metadata.get("encoding") == OFFLOADED_ENCODING


def reference_payload(sha: str, size: int) -> Payload:
    """The small payload Temporal keeps in place of an offloaded one."""
    return Payload(
        metadata={"encoding": OFFLOADED_ENCODING},
        data=orjson.dumps({"sha256": sha, "size": size}),
    )


def _reference(payload: Payload) -> str:
    try:
        sha = orjson.loads(payload.data)["sha256"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise OffloadedPayloadMissing(f"malformed offloaded-payload reference: {exc}") from exc
    if not isinstance(sha, str) or len(sha) != 64:
        raise OffloadedPayloadMissing("malformed offloaded-payload reference: bad sha256")
    return sha


class OffloadingPayloadCodec(PayloadCodec):
    """Offload payloads above ``Settings.payload_offload_bytes`` to MongoDB.

    Args:
        settings: ``payload_offload_bytes``, ``mongo_url`` and ``mongo_db``.
        threshold: overrides ``settings.payload_offload_bytes`` (tests).
    """

    def __init__(self, settings: Settings, *, threshold: int | None = None) -> None:
        self._settings = settings
        self.threshold = threshold if threshold is not None else settings.payload_offload_bytes
        self._client: AsyncMongoClient[dict[str, Any]] | None = None
        self._store: PayloadBlobStore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._recent = _RecentBlobs(RECENT_BYTES)

    def _blob_store(self) -> PayloadBlobStore:
        loop = asyncio.get_running_loop()
        if self._store is None or self._loop is not loop:
            # An async client belongs to the loop it was created in.
            self._client = mongo_client(self._settings, appname="spindle-payloads")
            self._store = PayloadBlobStore(self._client[self._settings.mongo_db])
            self._loop = loop
        return self._store

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Replace each payload larger than the threshold by a reference to it."""
        encoded = []
        for payload in payloads:
            if payload.ByteSize() <= self.threshold:
                encoded.append(payload)
                continue
            blob = payload.SerializeToString(deterministic=True)
            sha = hashlib.sha256(blob).hexdigest()
            if self._recent.get(sha) is None:
                try:
                    await self._blob_store().put(blob)
                except ConnectionFailure as exc:
                    raise Unavailable(
                        f"MongoDB is unavailable to store a {len(blob)}-byte Temporal payload"
                    ) from exc
                self._recent.add(sha, blob)
            encoded.append(reference_payload(sha, len(blob)))
        return encoded

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Fetch offloaded payloads back; every other payload passes unchanged."""
        decoded = []
        for payload in payloads:
            if not is_offloaded(payload):
                decoded.append(payload)
                continue
            sha = _reference(payload)
            blob = self._recent.get(sha)
            if blob is None:
                try:
                    blob = await self._blob_store().get(sha)
                except ConnectionFailure as exc:
                    raise Unavailable(
                        f"MongoDB is unavailable to fetch offloaded payload {sha}"
                    ) from exc
                self._recent.add(sha, blob)
            decoded.append(Payload.FromString(blob))
        return decoded

    async def close(self) -> None:
        """Close the Mongo client if one was opened in the running loop."""
        client, self._client, self._store = self._client, None, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()
        self._loop = None


__all__ = [
    "OFFLOADED_ENCODING",
    "OffloadedPayloadMissing",
    "OffloadingPayloadCodec",
    "PayloadBlobStore",
    "is_offloaded",
    "reference_payload",
]
