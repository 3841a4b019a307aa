"""Deleting a run's file over HTTP (``DELETE /runs/{workflow_id}/files/{name}``):
owner-checked like an upload, a 404 problem for an unknown name or another tenant's
run, and once deleted the file is gone for downloads, the list and the agent's
``read_file`` (docs/conversations.md, Uploads)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from spindle.shared.contracts.errors import ToolError
from spindle.shared.store.file_store import FileStore
from spindle.worker.offerings import load_tools
from spindle.worker.tools.run_files import RunFiles, reading_files
from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import start

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


@pytest.fixture
async def run(http: httpx.AsyncClient, examples: list[str], unique: str) -> dict[str, Any]:
    return await start(http, graph="pipeline", input={"text": f"delete test {unique}"})


async def test_an_uploaded_file_is_deleted_by_its_owner_only(
    clients: dict[str, httpx.AsyncClient], stack: SpindleStack, run: dict[str, Any]
) -> None:
    alice, bob, mallory = clients["alice"], clients["bob"], clients["mallory"]
    workflow_id, run_id = run["workflow_id"], run["run_id"]
    files = f"/runs/{workflow_id}/{run_id}/files"
    for body in (b"first", b"second"):  # two stored versions of one name
        sent = await alice.post(files, files={"file": ("notes.txt", body, "text/plain")})
        assert sent.status_code == 201, sent.text
    delete_url = f"/runs/{workflow_id}/files/notes.txt"

    # bob (same tenant, no run-control role) may read but not delete; mallory's
    # tenant does not see the run at all.
    refused = await bob.delete(delete_url)
    assert refused.status_code == 403 and refused.headers["content-type"].startswith(PROBLEM)
    hidden = await mallory.delete(delete_url)
    assert hidden.status_code == 404 and hidden.headers["content-type"].startswith(PROBLEM)
    assert (await alice.get(f"{files}/notes.txt")).content == b"second"

    deleted = await alice.delete(delete_url)
    assert deleted.status_code == 204, deleted.text
    assert deleted.content == b""
    assert (await alice.get(files)).json()["files"] == []
    gone = await alice.get(f"{files}/notes.txt")
    assert gone.status_code == 404 and gone.headers["content-type"].startswith(PROBLEM)

    again = await alice.delete(delete_url)
    assert again.status_code == 404, again.text
    assert "notes.txt" in again.json()["detail"]
    unsafe = await alice.delete(f"/runs/{workflow_id}/files/files%2F..%2Fx")
    assert unsafe.status_code == 422 and unsafe.json()["errors"][0]["rule"] == "not_dot"

    # The agent's read_file, on the same store, no longer finds it.
    tenant = (await alice.get(f"/runs/{workflow_id}")).json()["tenant_id"]
    store = FileStore.from_settings(stack.settings)
    try:
        with (
            reading_files(RunFiles(store, tenant, workflow_id, 1024)),
            pytest.raises(ToolError, match=r"no file 'notes\.txt' in this run's files"),
        ):
            await load_tools()["read_file"].call({"path": "notes.txt"})
    finally:
        await store.close()
