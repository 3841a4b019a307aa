"""Binary data on any node's output, by reference (seed 001), with the real stores.

A ``tool`` node whose tool returns bytes has them stored as run files; its output
names them under ``binary`` and a client (or the ``read_file`` tool) reads them by
that reference. Nothing of the bytes is in the output, the report or the archive.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from spindle.nodes import tool
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.worker.activities.nodes import NodeActivities
from spindle.worker.contracts import NodeExecution, RunRef
from spindle.worker.tools.run_files import RunFiles, read_run_file, reading_files
from tests.integration.activity_env import env

pytestmark = pytest.mark.integration

PDF = b"%PDF-1.7 fake \x00\xff\xfe"
PNG = b"\x89PNG\r\n\x1a\n fake"


@tool(name="test_attach_render")
def render(title: str) -> dict[str, Any]:
    """Render a title as a document and a thumbnail (test tool)."""
    return {"title": title, "pages": 1, "pdf": PDF, "thumbnail": PNG}


@tool(name="test_attach_raw")
def raw(title: str) -> bytes:
    """Render a title as bytes only (test tool)."""
    return PDF + title.encode()


@pytest.fixture(scope="module")
def io_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(redis_url=redis_url, mongo_url=mongo_url, mongo_db="spindle_attachments")


@pytest.fixture(scope="module")
async def bus(io_settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(io_settings)
    yield bus
    await bus.close()


@pytest.fixture(scope="module")
async def archive(io_settings: Settings) -> AsyncIterator[RunArchive]:
    archive = RunArchive.from_settings(io_settings)
    await archive.ensure_indexes()
    yield archive
    await archive.close()


def tool_node(run: RunRef, name: str) -> NodeExecution:
    return NodeExecution(
        run=run,
        node=NodeSpec(id="doc", type="tool", params={"tool": name, "args": {"title": "Q3"}}),
        visit=2,
        state={"input": None, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


async def test_bytes_in_a_tool_nodes_output_are_run_files_read_by_reference(
    bus: MessageBus, archive: RunArchive, io_settings: Settings
) -> None:
    wf = f"att-{uuid.uuid4().hex[:10]}"
    run = RunRef(workflow_id=wf, run_id="r1", stream_id=wf, graph_name="g", tenant_id="acme")
    acts = NodeActivities(bus, archive, settings=io_settings)
    outcome = await env("doc.2").run(acts.execute_node, tool_node(run, "test_attach_render"))

    output = outcome.output
    assert {k: output[k] for k in ("title", "pages")} == {"title": "Q3", "pages": 1}
    assert set(output["binary"]) == {"pdf", "thumbnail"}
    pdf = output["binary"]["pdf"]
    assert pdf["file"] == "nodes/doc/2/pdf" and pdf["size"] == len(PDF)
    # JSON all through: what Temporal and the archive hold has no byte of the files.
    assert b"PDF-1.7" not in orjson.dumps(output)

    files = FileStore(archive.database)
    for name, content in (("pdf", PDF), ("thumbnail", PNG)):
        reference = output["binary"][name]
        stored = await files.get(tenant_id="acme", workflow_id=wf, name=reference["file"])
        assert b"".join([piece async for piece in files.open(stored)]) == content
        assert stored.sha256 == reference["sha256"]

    # An agent of the same run reads it by that reference with ``read_file``.
    with reading_files(RunFiles(files, "acme", wf, io_settings.read_file_max_bytes)):
        read = await read_run_file(pdf["file"])
    assert read["size"] == len(PDF) and read["path"] == pdf["file"]

    [report] = await archive.node_reports(wf)
    assert report["output"]["payload"]["binary"]["pdf"]["file"] == "nodes/doc/2/pdf"


async def test_a_node_whose_output_is_bytes_outputs_a_reference(
    bus: MessageBus, io_settings: Settings
) -> None:
    wf = f"att-{uuid.uuid4().hex[:10]}"
    run = RunRef(workflow_id=wf, run_id="r1", stream_id=wf, graph_name="g")
    # Without an archive the files go to the settings' MongoDB all the same.
    acts = NodeActivities(bus, None, settings=io_settings)
    outcome = await env("doc.2").run(acts.execute_node, tool_node(run, "test_attach_raw"))
    assert list(outcome.output) == ["binary"]
    assert outcome.output["binary"]["data"]["size"] == len(PDF) + 2
