"""A run's files over HTTP: upload (multipart), list, download, replace, and
what is refused (unsafe names 422, oversized uploads 413)."""

from __future__ import annotations

import hashlib
import os
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from spindle.shared.store.file_store import FileStore
from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import start

pytestmark = pytest.mark.e2e


@pytest.fixture
async def run(http: httpx.AsyncClient, examples: list[str], unique: str) -> dict[str, Any]:
    return await start(http, graph="pipeline", input={"text": f"files test {unique}"})


def files_url(run: dict[str, Any]) -> str:
    return f"/runs/{run['workflow_id']}/{run['run_id']}/files"


async def upload(
    http: httpx.AsyncClient, run: dict[str, Any], name: str, data: bytes, content_type: str
) -> httpx.Response:
    return await http.post(files_url(run), files={"file": (name, data, content_type)})


async def test_upload_list_and_download(
    http: httpx.AsyncClient, stack: SpindleStack, run: dict[str, Any], unique: str
) -> None:
    name = f"Résumé {unique}.pdf"
    data = os.urandom(min(600_000, stack.settings.max_upload_bytes))  # several 255 KiB chunks

    reply = await upload(http, run, name, data, "application/pdf")

    assert reply.status_code == 201, reply.text
    stored = reply.json()
    assert stored["name"] == name and stored["workflow_id"] == run["workflow_id"]
    assert stored["size"] == len(data)
    assert stored["sha256"] == hashlib.sha256(data).hexdigest()
    assert stored["content_type"] == "application/pdf"
    assert stored["uploaded_by"]
    assert reply.headers["location"] == f"{files_url(run)}/{quote(name, safe='')}"

    listed = await http.get(files_url(run))
    assert listed.status_code == 200
    assert [f["name"] for f in listed.json()["files"]] == [name]

    download = await http.get(reply.headers["location"])
    assert download.status_code == 200
    assert download.content == data
    assert download.headers["content-type"] == "application/pdf"
    assert download.headers["etag"] == f'"{stored["sha256"]}"'
    disposition = download.headers["content-disposition"]
    assert disposition.startswith("attachment;")
    assert f"filename*=UTF-8''{quote(name, safe='')}" in disposition
    assert download.headers["x-content-type-options"] == "nosniff"

    cached = await http.get(
        reply.headers["location"], headers={"If-None-Match": download.headers["etag"]}
    )
    assert cached.status_code == 304 and cached.content == b""


async def test_uploading_a_name_again_replaces_the_file(
    http: httpx.AsyncClient, run: dict[str, Any]
) -> None:
    assert (await upload(http, run, "notes.txt", b"first", "text/plain")).status_code == 201
    second = await upload(http, run, "notes.txt", b"second, longer", "text/plain")
    assert second.status_code == 201

    listed = (await http.get(files_url(run))).json()["files"]
    assert [(f["name"], f["size"]) for f in listed] == [("notes.txt", len(b"second, longer"))]
    download = await http.get(f"{files_url(run)}/notes.txt")
    assert download.content == b"second, longer"


async def test_an_unknown_file_is_a_404_problem(
    http: httpx.AsyncClient, run: dict[str, Any]
) -> None:
    reply = await http.get(f"{files_url(run)}/nothing-here.txt")
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("application/problem+json")


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "..", "reports/q3.pdf", "..\\..\\boot.ini", " spaced.txt", "x" * 256],
)
async def test_unsafe_file_names_are_refused(
    http: httpx.AsyncClient, run: dict[str, Any], name: str
) -> None:
    reply = await upload(http, run, name, b"payload", "text/plain")

    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert problem["errors"][0]["field"] == "name"
    assert (await http.get(files_url(run))).json()["files"] == []


async def test_an_oversized_upload_is_refused_and_not_kept(
    http: httpx.AsyncClient, stack: SpindleStack, run: dict[str, Any]
) -> None:
    too_big = b"\0" * (stack.settings.max_upload_bytes + 1)

    reply = await upload(http, run, "huge.bin", too_big, "application/octet-stream")

    assert reply.status_code == 413, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert (await http.get(files_url(run))).json()["files"] == []


async def test_a_nested_artifact_is_listed_and_downloadable(
    http: httpx.AsyncClient, stack: SpindleStack, run: dict[str, Any], unique: str
) -> None:
    # What a run's activity writes (a workstream's merged result), straight into the store.
    store = FileStore.from_settings(stack.settings)
    tenant = (await http.get(f"/runs/{run['workflow_id']}")).json()["tenant_id"]
    try:
        stored = await store.put_bytes(
            tenant_id=tenant,
            workflow_id=run["workflow_id"],
            name=f"files/ws-1/result {unique}.md",
            data=b"# merged result",
            content_type="text/markdown",
        )
    finally:
        await store.close()

    listed = (await http.get(files_url(run))).json()["files"]
    assert [f["name"] for f in listed] == [stored.name]
    for url in (
        f"{files_url(run)}/files/ws-1/result {unique}.md",
        f"{files_url(run)}/{quote(stored.name, safe='')}",  # slashes sent as %2F
    ):
        download = await http.get(url)
        assert download.status_code == 200, download.text
        assert download.content == b"# merged result"
        assert download.headers["content-type"].startswith("text/markdown")
        # Saved under its last segment, never as a path.
        assert f'filename="result {unique}.md"' in download.headers["content-disposition"]
    assert (await http.get(f"{files_url(run)}/files/ws-2/result.md")).status_code == 404


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("files%2F..%2Fx", "not_dot"),  # files/../x, not normalised away by the client
        ("%2Fabs", "no_empty_segment"),
        ("a//b", "no_empty_segment"),
        ("out%5Cx", "no_path_separator"),
    ],
)
async def test_a_traversing_download_path_is_refused(
    http: httpx.AsyncClient, run: dict[str, Any], path: str, rule: str
) -> None:
    reply = await http.get(f"{files_url(run)}/{path}")

    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert reply.json()["errors"][0] == {
        "field": "name",
        "rule": rule,
        "message": reply.json()["errors"][0]["message"],
    }
