"""A run's files in MongoDB (the nx-27017 wire server): round trip, replace,
size limit, tenant isolation, and which file names are refused."""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
import uuid
from collections.abc import AsyncIterator

import pytest
from pymongo import AsyncMongoClient

from spindle.shared.contracts.errors import NotFound, PayloadTooLarge, ValidationFailed
from spindle.shared.store.chunked_blobs import CHUNK_SIZE
from spindle.shared.store.file_store import (
    FileStore,
    StoredFile,
    safe_artifact_path,
    safe_file_name,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def store(mongo_url: str) -> AsyncIterator[FileStore]:
    """A file store in a database of its own, so chunk counts are this module's only."""
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        mongo_url, tz_aware=True, serverSelectionTimeoutMS=5000
    )
    file_store = FileStore(client[f"spindle_files_{uuid.uuid4().hex[:8]}"])
    yield file_store
    await client.drop_database(file_store.files.database.name)
    await client.close()


def run_id() -> str:
    return f"wf-{uuid.uuid4().hex[:10]}"


async def pieces(data: bytes, size: int = 100_000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def put(
    store: FileStore,
    workflow_id: str,
    name: str,
    data: bytes,
    *,
    tenant: str = "acme",
    max_bytes: int = 10_000_000,
    content_type: str = "application/pdf",
) -> StoredFile:
    return await store.put(
        tenant_id=tenant,
        workflow_id=workflow_id,
        name=name,
        content_type=content_type,
        chunks=pieces(data),
        max_bytes=max_bytes,
        uploaded_by="alice",
    )


async def read(store: FileStore, stored: StoredFile) -> bytes:
    return b"".join([piece async for piece in store.open(stored)])


async def all_chunks(store: FileStore) -> int:
    return await store.chunks.collection.count_documents({})


async def test_round_trip_of_a_multi_chunk_file(store: FileStore) -> None:
    wf = run_id()
    data = os.urandom(2 * CHUNK_SIZE + 12_345)  # pieces of 100 kB straddle chunk borders

    stored = await put(store, wf, "Résumé 2024.pdf", data)

    assert (stored.tenant_id, stored.workflow_id, stored.name) == ("acme", wf, "Résumé 2024.pdf")
    assert stored.size == len(data)
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert (stored.content_type, stored.uploaded_by) == ("application/pdf", "alice")
    assert stored.uploaded_at.tzinfo is not None
    got = await store.get(tenant_id="acme", workflow_id=wf, name="Résumé 2024.pdf")
    assert got == stored
    assert await read(store, got) == data
    assert await store.chunks.count(stored.file_id) == math.ceil(len(data) / CHUNK_SIZE)
    assert await store.list(tenant_id="acme", workflow_id=wf) == [stored]


async def test_empty_file_and_unsafe_content_type(store: FileStore) -> None:
    wf = run_id()
    stored = await put(store, wf, "empty.txt", b"", content_type="text/html\r\nX-Evil: 1")
    assert stored.size == 0 and stored.sha256 == hashlib.sha256(b"").hexdigest()
    assert stored.content_type == "application/octet-stream"
    assert await read(store, stored) == b""


async def test_same_name_again_replaces_the_older_file(store: FileStore) -> None:
    wf = run_id()
    first = await put(store, wf, "notes.txt", b"first version" * 30_000)
    other = await put(store, wf, "other.txt", b"unrelated")
    second = await put(store, wf, "notes.txt", b"second version")

    assert second.file_id != first.file_id
    got = await store.get(tenant_id="acme", workflow_id=wf, name="notes.txt")
    assert got == second
    assert await read(store, got) == b"second version"
    listed = await store.list(tenant_id="acme", workflow_id=wf)
    assert [(f.name, f.file_id) for f in listed] == [
        ("notes.txt", second.file_id),
        ("other.txt", other.file_id),
    ]
    assert await store.chunks.count(first.file_id) == 0  # the old content is gone


async def test_concurrent_uploads_of_one_name_leave_one_file(store: FileStore) -> None:
    wf = run_id()
    uploads = await asyncio.gather(
        *(put(store, wf, "race.bin", bytes([i]) * 300_000) for i in range(4))
    )
    listed = await store.list(tenant_id="acme", workflow_id=wf)
    assert len(listed) == 1
    winner = listed[0]
    assert winner.file_id == max(u.file_id for u in uploads)  # the newest upload wins
    assert await read(store, winner) == bytes([uploads.index(winner)]) * 300_000
    for loser in uploads:
        if loser.file_id != winner.file_id:
            assert await store.chunks.count(loser.file_id) == 0


async def test_over_the_size_limit_nothing_stays_behind(store: FileStore) -> None:
    wf = run_id()
    before = await all_chunks(store)
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield os.urandom(64 * 1024)

    limit = 3 * CHUNK_SIZE
    with pytest.raises(PayloadTooLarge) as refused:
        await store.put(
            tenant_id="acme",
            workflow_id=wf,
            name="huge.bin",
            content_type="application/octet-stream",
            chunks=endless(),
            max_bytes=limit,
            uploaded_by="alice",
        )
    assert refused.value.status == 413 and str(limit) in refused.value.detail
    assert pulled == limit // (64 * 1024) + 1  # streamed: stopped at the first piece over
    assert await store.list(tenant_id="acme", workflow_id=wf) == []
    assert await all_chunks(store) == before


async def test_an_upload_that_fails_midway_leaves_nothing(store: FileStore) -> None:
    wf = run_id()
    before = await all_chunks(store)

    async def broken() -> AsyncIterator[bytes]:
        for _ in range(12):
            yield os.urandom(100_000)
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await store.put(
            tenant_id="acme",
            workflow_id=wf,
            name="partial.bin",
            content_type="application/octet-stream",
            chunks=broken(),
            max_bytes=10_000_000,
            uploaded_by="alice",
        )
    assert await store.list(tenant_id="acme", workflow_id=wf) == []
    assert await all_chunks(store) == before


async def test_a_replacement_over_the_limit_keeps_the_old_file(store: FileStore) -> None:
    wf = run_id()
    kept = await put(store, wf, "plan.txt", b"v1")
    with pytest.raises(PayloadTooLarge):
        await put(store, wf, "plan.txt", b"x" * 5000, max_bytes=4096)
    got = await store.get(tenant_id="acme", workflow_id=wf, name="plan.txt")
    assert got == kept and await read(store, got) == b"v1"


async def test_tenants_never_see_each_others_files(store: FileStore) -> None:
    wf = run_id()
    with pytest.raises(NotFound) as unknown:
        await store.get(tenant_id="acme", workflow_id=wf, name="report.txt")
    mine = await put(store, wf, "report.txt", b"acme's numbers", tenant="acme")

    with pytest.raises(NotFound) as foreign:
        await store.get(tenant_id="globex", workflow_id=wf, name="report.txt")
    assert str(foreign.value) == str(unknown.value)  # same answer as an unknown name
    assert await store.list(tenant_id="globex", workflow_id=wf) == []

    theirs = await put(store, wf, "report.txt", b"globex's numbers", tenant="globex")
    assert await store.get(tenant_id="acme", workflow_id=wf, name="report.txt") == mine
    assert await read(store, theirs) == b"globex's numbers"
    assert await store.list(tenant_id="acme", workflow_id=wf) == [mine]


async def test_put_refuses_an_unsafe_name_before_storing(store: FileStore) -> None:
    wf = run_id()
    before = await all_chunks(store)
    with pytest.raises(ValidationFailed):
        await put(store, wf, "../../etc/passwd", b"root:x:0:0")
    assert await all_chunks(store) == before


@pytest.mark.parametrize(
    "name",
    [
        "report.pdf",
        "Résumé 2024.pdf",
        "数据.csv",
        "emoji 👩‍💻.txt",  # a zero-width joiner is a format character, not a control
        ".hidden",
        "a..b",
        "x" * 255,
        "é" * 127,  # 254 bytes
    ],
)
def test_safe_file_name_keeps(name: str) -> None:
    assert safe_file_name(name) == name


def test_safe_file_name_normalises_to_nfc() -> None:
    assert safe_file_name("Re\u0301sume\u0301.pdf") == "Résumé.pdf"


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "not_empty"),
        (".", "not_dot"),
        ("..", "not_dot"),
        ("../secret", "no_path_separator"),
        ("a/b", "no_path_separator"),
        ("/etc/passwd", "no_path_separator"),
        ("..\\..\\boot.ini", "no_path_separator"),
        ("a\x00b", "no_control_characters"),
        ("line\nbreak", "no_control_characters"),
        ("tab\there", "no_control_characters"),
        ("del\x7f", "no_control_characters"),
        ("c1\x85", "no_control_characters"),
        ("invoice\u202etxt.exe", "no_control_characters"),
        (" leading", "no_surrounding_whitespace"),
        ("trailing ", "no_surrounding_whitespace"),
        ("x" * 256, "max_bytes"),
        ("é" * 128, "max_bytes"),  # 128 characters, 256 bytes
        ("\ud800.txt", "utf8"),
    ],
)
def test_safe_file_name_refuses(name: str, rule: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        safe_file_name(name)
    assert refused.value.status == 422
    assert refused.value.errors[0]["field"] == "name"
    assert refused.value.errors[0]["rule"] == rule


@pytest.mark.parametrize(
    "name",
    [
        "out/result.md",
        "files/ws-1/result.md",
        "single.txt",
        "a/.hidden/b..c",
        "数据/Résumé.pdf",
        "/".join(["x" * 255] * 4),  # 1023 bytes
    ],
)
def test_safe_artifact_path_keeps(name: str) -> None:
    assert safe_artifact_path(name) == name


def test_safe_artifact_path_normalises_to_nfc() -> None:
    assert safe_artifact_path("out/Re\u0301sume\u0301.pdf") == "out/Résumé.pdf"


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "not_empty"),
        ("files/../x", "not_dot"),
        ("../x", "not_dot"),
        ("out/.", "not_dot"),
        ("..", "not_dot"),
        ("/abs", "no_empty_segment"),
        ("/etc/passwd", "no_empty_segment"),
        ("a//b", "no_empty_segment"),
        ("out/", "no_empty_segment"),
        ("out\\x", "no_path_separator"),
        ("..\\..\\boot.ini", "no_path_separator"),
        ("out/a\x00b", "no_control_characters"),
        ("out/line\nbreak", "no_control_characters"),
        ("out/invoice\u202etxt.exe", "no_control_characters"),
        ("out/ spaced", "no_surrounding_whitespace"),
        ("out/" + "x" * 256, "max_bytes"),
        ("/".join(["x" * 255] * 4) + "/y", "max_bytes"),  # 1025 bytes
        ("out/\ud800", "utf8"),
    ],
)
def test_safe_artifact_path_refuses(name: str, rule: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        safe_artifact_path(name)
    assert refused.value.status == 422
    assert refused.value.errors[0] == {
        "field": "name",
        "rule": rule,
        "message": refused.value.errors[0]["message"],
    }
    assert repr(name) in refused.value.errors[0]["message"]


async def test_nested_artifact_paths_round_trip_and_list_by_prefix(store: FileStore) -> None:
    wf = run_id()
    report = await put(store, wf, "out/report.md", b"# report", content_type="text/markdown")
    data = await put(store, wf, "files/ws-1/data.csv", b"a,b\n1,2\n", content_type="text/csv")
    await put(store, wf, "notes.txt", b"top level")

    got = await store.get(tenant_id="acme", workflow_id=wf, name="out/report.md")
    assert got == report and await read(store, got) == b"# report"
    listed = await store.list(tenant_id="acme", workflow_id=wf)
    assert [f.name for f in listed] == ["files/ws-1/data.csv", "notes.txt", "out/report.md"]
    under_files = await store.list(tenant_id="acme", workflow_id=wf, prefix="files/")
    assert under_files == [data]
    with pytest.raises(NotFound):
        await store.get(tenant_id="acme", workflow_id=wf, name="out/../notes.txt")


async def test_put_refuses_a_traversing_artifact_path_before_storing(store: FileStore) -> None:
    wf = run_id()
    before = await all_chunks(store)
    for name in ("files/../x", "/abs", "a//b"):
        with pytest.raises(ValidationFailed):
            await put(store, wf, name, b"payload")
    assert await store.list(tenant_id="acme", workflow_id=wf) == []
    assert await all_chunks(store) == before


async def test_copy_file_copies_content_to_another_run_of_the_tenant(store: FileStore) -> None:
    child, parent = run_id(), run_id()
    data = os.urandom(CHUNK_SIZE + 77)
    source = await put(store, child, "out/result.bin", data, content_type="image/png")

    copied = await store.copy_file("acme", child, "out/result.bin", parent, "files/ws-1/result.bin")
    again = await store.copy_file("acme", child, "out/result.bin", parent, "files/ws-1/result.bin")

    assert (copied.workflow_id, copied.name) == (parent, "files/ws-1/result.bin")
    assert (copied.sha256, copied.size, copied.content_type) == (
        source.sha256,
        len(data),
        "image/png",
    )
    listed = await store.list(tenant_id="acme", workflow_id=parent)
    assert listed == [again]  # a retried copy replaces, never duplicates
    assert await read(store, again) == data
    assert await store.chunks.count(copied.file_id) == 0
    assert await store.get(tenant_id="acme", workflow_id=child, name="out/result.bin") == source
    with pytest.raises(NotFound):
        await store.copy_file("globex", child, "out/result.bin", parent, "files/ws-1/x")
    with pytest.raises(ValidationFailed):
        await store.copy_file("acme", child, "out/result.bin", parent, "files/../escape")


async def test_put_bytes_stores_an_in_memory_artifact(store: FileStore) -> None:
    wf = run_id()
    stored = await store.put_bytes(
        tenant_id="acme",
        workflow_id=wf,
        name="out/answer.md",
        data=b"42",
        content_type="text/markdown",
    )
    assert (stored.name, stored.size, stored.content_type) == ("out/answer.md", 2, "text/markdown")
    assert await read(store, stored) == b"42"
