"""A recorded fork's history replays: its activities answered from the source's
records, the workflow took only what they returned (docs/replay-and-compare.md).

``test_a_recorded_fork_history_replays`` runs a source and its recorded fork on the
dev server; with ``SPINDLE_RECORD_HISTORIES=1`` it writes
``tests/histories/recorded-fork.json`` (``python tests/histories/record.py``), which
``test_recorded_histories_replay_with_the_current_workflow`` replays with the rest.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType

from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.forks import build_fork_input
from spindle.worker.examples import load_example
from spindle.worker.replay.histories import load_history, save_history
from spindle.worker.replay.replayer import replay, replay_histories
from tests.workflow.runs import GraphRunner

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
RECORD = os.environ.get("SPINDLE_RECORD_HISTORIES") == "1"
STEM = "recorded-fork"


@pytest.mark.integration
async def test_a_recorded_fork_history_replays(dev_runner: GraphRunner) -> None:
    source_input = GraphRunInput(
        graph=load_example("research-agent"),
        input={"question": "What is Temporal? And what is 17 * 3?"},
    )
    source_id = f"recorded-fork-source-{uuid.uuid4().hex[:8]}"
    source = await dev_runner.client.execute_workflow(
        GRAPH_RUN_WORKFLOW,
        source_input,
        id=source_id,
        task_queue=dev_runner.task_queue,
        result_type=GraphRunResult,
    )
    fork_input = build_fork_input(
        source_input,
        {},
        ForkRequest(tools="recorded", llm="recorded"),
        source_workflow_id=source_id,
        candidate=None,
        tenant_id=source_input.tenant_id,
        user_id=None,
    )
    workflow_id = STEM if RECORD else f"{STEM}-{uuid.uuid4().hex[:8]}"
    handle = await dev_runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        fork_input,
        id=workflow_id,
        task_queue=dev_runner.task_queue,
        result_type=GraphRunResult,
    )
    assert (await handle.result()).output == source.output
    history = await handle.fetch_history()
    assert await replay([(workflow_id, history)]) == []
    if RECORD:
        save_history(history, HISTORIES)


@pytest.mark.workflow
async def test_the_committed_recorded_fork_replays_and_is_one() -> None:
    path = HISTORIES / f"{STEM}.json"
    history = load_history(path)
    started = history.events[0].workflow_execution_started_event_attributes
    run_input = json.loads(started.input.payloads[0].data)
    assert run_input["replay"]["tools"] == run_input["replay"]["llm"] == "recorded"
    # Its activities were told to replay (RunRef.replay), and answered.
    scheduled = [
        e.activity_task_scheduled_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    told = [
        json.loads(a.input.payloads[0].data)
        for a in scheduled
        if a.activity_type.name in {"tool_call", "llm_turn"}
    ]
    assert told and all(
        t["execution"]["run"]["replay"]["source_workflow_id"] == run_input["replay"]["workflow_id"]
        for t in told
    )
    assert await replay_histories([path]) == []
