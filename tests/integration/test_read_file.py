"""The built-in ``read_file`` tool against a real file store (the Mongo wire server):
text with its size cap and offset, binary by reference, only the calling run's files
(tenant and run scoped), unsafe paths refused (docs/conversations.md#reading-run-files)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from pymongo import AsyncMongoClient

from spindle.shared.contracts.errors import ToolError
from spindle.shared.store.chunked_blobs import CHUNK_SIZE
from spindle.shared.store.file_store import FileStore
from spindle.worker.offerings import load_tools
from spindle.worker.tools.run_files import RunFiles, reading_files

pytestmark = pytest.mark.integration

CAP = 1024


@pytest.fixture(scope="module")
async def store(mongo_url: str) -> AsyncIterator[FileStore]:
    client: AsyncMongoClient[dict[str, object]] = AsyncMongoClient(
        mongo_url, tz_aware=True, serverSelectionTimeoutMS=5000
    )
    file_store = FileStore(client[f"spindle_read_file_{uuid.uuid4().hex[:8]}"])
    yield file_store
    await client.drop_database(file_store.files.database.name)
    await client.close()


@pytest.fixture
def run() -> RunFiles:
    return RunFiles(None, "acme", f"wf-{uuid.uuid4().hex[:10]}", CAP)


async def read(files: RunFiles, **arguments: object) -> dict[str, object]:
    with reading_files(files):
        result = await load_tools()["read_file"].call(dict(arguments))
    assert isinstance(result, dict)
    return result


async def put(
    store: FileStore, run: RunFiles, name: str, data: bytes, content_type: str, tenant: str = ""
) -> None:
    await store.put_bytes(
        tenant_id=tenant or run.tenant_id,
        workflow_id=run.workflow_id,
        name=name,
        data=data,
        content_type=content_type,
    )


async def test_text_is_read_up_to_the_cap_then_from_its_offset(
    store: FileStore, run: RunFiles
) -> None:
    files = RunFiles(store, run.tenant_id, run.workflow_id, CAP)
    short = "hello, notes\n"
    await put(store, run, "notes.txt", short.encode(), "text/plain")
    whole = await read(files, path="notes.txt")
    assert whole["text"] == short and whole["size"] == len(short)
    assert whole["next_offset"] is None and whole["truncated"] is False

    # Longer than the cap, with a multi-byte character across the cut, and over
    # more than one stored chunk.
    text = "é" + "a" * (CAP - 3) + "€" + "b" * (CHUNK_SIZE + 10)
    await put(store, run, "long.md", text.encode(), "text/markdown")
    first = await read(files, path="long.md")
    assert first["truncated"] is True and first["text"] == "é" + "a" * (CAP - 3)
    assert first["next_offset"] == CAP - 1  # the "€" (3 bytes) crossed the cap: not cut
    second = await read(files, path="long.md", offset=first["next_offset"])
    assert str(second["text"]).startswith("€b") and second["offset"] == CAP - 1
    parts = [first["text"], second["text"]]
    offset = second["next_offset"]
    while offset is not None:
        page = await read(files, path="long.md", offset=offset)
        parts.append(page["text"])
        offset = page["next_offset"]
    assert "".join(str(p) for p in parts) == text  # every byte once, in order
    with pytest.raises(ToolError, match="outside"):
        await read(files, path="long.md", offset=len(text.encode()) + 5)


async def test_binary_is_given_by_reference(store: FileStore, run: RunFiles) -> None:
    files = RunFiles(store, run.tenant_id, run.workflow_id, CAP)
    await put(store, run, "logo.png", b"\x89PNG\r\n\x1a\n" + bytes(300), "image/png")
    ref = await read(files, path="logo.png")
    assert "text" not in ref and ref["binary"] is True
    assert (ref["name"], ref["content_type"], ref["size"], ref["path"]) == (
        "logo.png",
        "image/png",
        308,
        "logo.png",
    )
    assert ref["url"] == f"/runs/{run.workflow_id}/latest/files/logo.png"
    # An untyped upload is read when it is UTF-8 text, referenced when it is not.
    await put(store, run, "data.bin", b"\x00\x01\xff", "application/octet-stream")
    assert (await read(files, path="data.bin"))["binary"] is True
    await put(store, run, "plain", b"just text", "application/octet-stream")
    assert (await read(files, path="plain"))["text"] == "just text"


async def test_only_the_runs_own_files_and_no_unsafe_path(store: FileStore, run: RunFiles) -> None:
    files = RunFiles(store, run.tenant_id, run.workflow_id, CAP)
    other_run = RunFiles(store, run.tenant_id, f"wf-{uuid.uuid4().hex[:10]}", CAP)
    await put(store, other_run, "secret.txt", b"other run", "text/plain")
    other_tenant = RunFiles(store, "globex", run.workflow_id, CAP)
    await put(store, other_tenant, "theirs.txt", b"other tenant", "text/plain", tenant="globex")
    for name in ("secret.txt", "theirs.txt"):
        with pytest.raises(ToolError, match=f"no file '{name}' in this run's files"):
            await read(files, path=name)
    assert (await read(other_tenant, path="theirs.txt"))["text"] == "other tenant"
    for path in ("../secret.txt", "/etc/passwd", "files/../secret.txt", "a//b", "x\\..\\y"):
        with pytest.raises(ToolError, match="is refused"):
            await read(files, path=path)


async def test_outside_a_run_or_without_files_it_says_so(run: RunFiles) -> None:
    with pytest.raises(ToolError, match="has no run here"):
        await load_tools()["read_file"].call({"path": "notes.txt"})
    with pytest.raises(ToolError, match="archiving is off"):
        await read(run, path="notes.txt")
