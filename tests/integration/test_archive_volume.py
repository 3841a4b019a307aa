"""A long run's archive: at most one MongoDB document per node, nothing lost.

A loop of 1,000 node executions on the real worker with the archive and its
archiver running, as ``spindle worker`` runs them. The archiver writes a batch's
messages of a stream as one page and its node reports of a run as one page, so
the documents of the run (run document, message pages, report pages, prompt
trace) stay well under one per node, while every node execution is read back
once, in order, with its input and output NodeMessages.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

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
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.run_trace import run_trace
from spindle.worker.archive_outbox import archiver_running
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


async def test_a_thousand_node_run_is_archived_in_under_one_document_per_node(
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
    assert sum(documents.values()) <= 1_000, documents


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
