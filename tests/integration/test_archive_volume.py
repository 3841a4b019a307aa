"""A long run's archive: at most one MongoDB document per node, nothing lost.

A loop of 1,000 node executions on the real worker with the archive and its
archiver running, as ``spindle worker`` runs them. The archiver adds each batch's
messages of a stream and node reports of a run to the open page of each until it
is full, so the run is its run document and a page per ``PAGE_MAX_MESSAGES``
messages or reports (or about ``OPEN_PAGE_MAX_BYTES``), while every node execution is
read back once, in order, with its input and output NodeMessages.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import PAGE_MAX_MESSAGES, RunArchive
from spindle.shared.store.open_pages import OPEN_PAGE_MAX_BYTES
from spindle.shared.store.run_trace import run_trace
from spindle.worker.archive.catch_up import archiver_running
from spindle.worker.main import build_worker
from tests.history_volume import loop_graph

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ITERATIONS = 499  # 2 * (1 + 499) = 1,000 node executions


@pytest.fixture(scope="module")
async def archived_run(
    temporal_client: Client, settings: Settings
) -> AsyncIterator[tuple[RunArchive, str, GraphRunResult]]:
    """One finished 1,000-node run of a worker that archives through its archiver."""
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    task_queue = f"archive-volume-{uuid.uuid4().hex[:10]}"
    workflow_id = f"archive-volume-{uuid.uuid4().hex[:8]}"
    try:
        async with (
            archiver_running(archive, bus.redis, settings.mongo_db),
            build_worker(
                temporal_client, settings, bus=bus, archive=archive, task_queue=task_queue
            ),
        ):
            result = await temporal_client.execute_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=loop_graph(ITERATIONS), input={"text": "one two three"}),
                id=workflow_id,
                task_queue=task_queue,
                result_type=GraphRunResult,
            )
        yield archive, workflow_id, result
    finally:
        await archive.close()
        await bus.close()


async def test_a_thousand_node_run_is_archived_in_full_pages(
    archived_run: tuple[RunArchive, str, GraphRunResult],
) -> None:
    archive, workflow_id, result = archived_run
    assert result.status is RunStatus.COMPLETED
    assert result.report_counts == {"SUCCESS": 1_000}

    db = archive.database
    documents = {
        "runs": await db["runs"].count_documents({"_id": workflow_id}),
        "message_pages": await db["message_pages"].count_documents({"stream_id": workflow_id}),
        "node_report_pages": await db["node_report_pages"].count_documents(
            {"workflow_id": workflow_id}
        ),
        "node_reports": await db["node_reports"].count_documents({"workflow_id": workflow_id}),
        "run_trace": await db["run_trace"].count_documents({"workflowId": workflow_id}),
        "messages": await db["messages"].count_documents({"stream_id": workflow_id}),
    }
    print(f"\ndocuments of a 1,000-node run: {documents}")
    assert documents["runs"] == 1 and documents["node_reports"] == documents["messages"] == 0
    # A page is full before the next opens (count or bytes), whatever the
    # archiver's batches: 85 message pages and 84 report pages before open pages.
    messages = await archive.archived_messages(workflow_id)
    message_bytes = sum(len(m["raw"]) for m in messages)
    assert documents["message_pages"] <= math.ceil(len(messages) / PAGE_MAX_MESSAGES) + math.ceil(
        message_bytes / OPEN_PAGE_MAX_BYTES
    ), documents
    reports = await archive.node_reports(workflow_id)
    report_bytes = sum(len(orjson.dumps(r, default=str)) for r in reports)
    assert documents["node_report_pages"] <= math.ceil(
        len(reports) / PAGE_MAX_MESSAGES
    ) + math.ceil(report_bytes / OPEN_PAGE_MAX_BYTES), documents


async def test_every_node_execution_is_read_back_once_in_order_with_its_messages(
    archived_run: tuple[RunArchive, str, GraphRunResult],
) -> None:
    archive, workflow_id, _ = archived_run
    reports = await archive.node_reports(workflow_id)
    visits = [(r["node_id"], r["visit"]) for r in reports]
    expected = [(node, visit) for visit in range(1, ITERATIONS + 2) for node in ("fetch", "count")]
    assert visits == expected
    assert {r["status"] for r in reports} == {"SUCCESS"}
    assert all(r["output"]["payload"] for r in reports)

    trace = await run_trace(archive, workflow_id)
    envelopes = [r[side]["messageId"] for r in reports for side in ("input", "output")]
    assert [entry["messageId"] for entry in trace] == envelopes

    # Every message the run posted is archived once, in seq order.
    seqs = [m.seq for m in await archive.messages(workflow_id)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 2_000
