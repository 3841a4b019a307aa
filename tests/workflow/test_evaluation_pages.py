"""The ``Evaluation`` workflow in pages: it continues as new after each page of
``page_size`` runs, so each generation's history holds one page, and every run gets
its entry (docs/replay-and-compare.md#evaluations)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from temporalio.api.enums.v1 import EventType

from spindle.shared.contracts.evaluations import (
    EVALUATION_WORKFLOW,
    EvaluationCheck,
    EvaluationInput,
    EvaluationResult,
)
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.store.evaluations import EvaluationStore, summarize
from spindle.shared.store.run_document import RunRecord
from spindle.worker.examples import load_example
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

TEXTS = ["a great happy day", "a plain day", "a bad slow day"]


async def _source(runner: GraphRunner, text: str) -> str:
    """A completed pipeline run with its run document, as a gateway start writes it."""
    workflow_id = f"src-{uuid.uuid4().hex[:10]}"
    now = datetime.now(UTC)
    await runner.archive.create_run(
        RunRecord(
            workflow_id=workflow_id,
            run_id="",
            graph_name="pipeline",
            status="running",
            input={"text": text},
            created_at=now,
            updated_at=now,
        )
    )
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=load_example("pipeline"), input={"text": text}),
        id=workflow_id,
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    await handle.result()
    return workflow_id


async def test_an_evaluation_continues_as_new_after_each_page(runner: GraphRunner) -> None:
    sources = [await _source(runner, TEXTS[i % 3]) for i in range(7)]
    evaluation_id = f"eval-{uuid.uuid4().hex}"
    store = EvaluationStore(runner.archive.database)
    await store.create(
        evaluation_id,
        tenant_id="default",
        user_id=None,
        request={},
        graph="pipeline",
        source_ids=sources,
    )
    params = EvaluationInput(
        evaluation_id=evaluation_id,
        tenant_id="default",
        fork=ForkRequest(tools="recorded", llm="recorded"),
        checks=[EvaluationCheck(name="same", expr="source.output == candidate.output")],
        total=len(sources),
        concurrency=2,
        page_size=3,
        search_attributes=False,  # the time-skipping server has none
    )
    handle = await runner.client.start_workflow(
        EVALUATION_WORKFLOW,
        params,
        id=evaluation_id,
        task_queue=runner.task_queue,
        result_type=EvaluationResult,
    )
    result = await handle.result()
    assert result.status == "completed" and result.runs == 7

    # Three generations (pages of 3, 3 and 1 runs), each continued from the last.
    generations = 0
    run_id: str | None = None
    sizes = []
    while True:
        history = await runner.client.get_workflow_handle(
            evaluation_id, run_id=run_id
        ).fetch_history()
        generations += 1
        sizes.append(len(history.events))
        started = history.events[0].workflow_execution_started_event_attributes
        children = [
            e
            for e in history.events
            if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
        ]
        assert len(children) <= 3
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            break
    assert generations == 3, sizes
    # One page's events (about 25 per run), whatever the evaluation's size.
    assert max(sizes) <= 30 * params.page_size + 10, sizes

    entries = await store.entries(evaluation_id)
    assert [entry.source_id for entry in entries] == sources
    summary = summarize(entries)
    assert (summary.same, summary.changed, summary.failed, summary.pending) == (7, 0, 0, 0)
    assert summary.checks["same"].passed == 7
    assert (await store.get(evaluation_id) or {})["status"] == "completed"
