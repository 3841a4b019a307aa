"""Record histories of the example graphs on the real dev server, and replay them.

Every run replays its fresh history against the current code (must pass). With
``SPINDLE_RECORD_HISTORIES=1`` the histories are also written to
``tests/histories/<graph>.json`` (commit them): ``python tests/histories/record.py``.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from spindle.shared.contracts.runs import UserInput
from spindle.worker.examples import load_example
from spindle.worker.replay import record_history, replay, save_history
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.integration

HISTORIES = Path(__file__).resolve().parent.parent / "histories"
RECORD = os.environ.get("SPINDLE_RECORD_HISTORIES") == "1"

# graph name → (run input, answers to its prompts)
EXAMPLE_RUNS: dict[str, tuple[Any, list[UserInput]]] = {
    "pipeline": ({"text": "The export is broken and slow, I want a refund."}, []),
    "research-agent": ({"question": "What is Temporal? And what is 17 * 3?"}, []),
    "delegation": ({"topic": "durable execution"}, []),
    "review-triage": (
        {
            "reviews": [
                {"id": "r1", "text": "Great product, fast and easy"},
                {"id": "r2", "text": "Broken again, I want a refund"},
                {"text": "It arrived on Tuesday"},
            ]
        },
        [],
    ),
    "approval-flow": (
        {"topic": "durable runs"},
        [UserInput(data={"decision": "approve", "comment": "ship it"}, client_message_id="m1")],
    ),
}


@pytest.mark.parametrize("name", sorted(EXAMPLE_RUNS))
async def test_example_history_replays(dev_runner: GraphRunner, name: str) -> None:
    run_input, answers = EXAMPLE_RUNS[name]
    history = await record_history(
        dev_runner.client,
        load_example(name),
        run_input,
        task_queue=dev_runner.task_queue,
        workflow_id=name if RECORD else f"{name}-{uuid.uuid4().hex[:8]}",
        stream_id=f"history-{name}-{uuid.uuid4().hex[:8]}",
        answers=answers,
    )
    kinds = [e.event_type for e in history.events]
    assert kinds.count(EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED) >= 3
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    accepted = kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    assert accepted == len(answers)

    histories = [(name, history)]
    if name == "delegation":
        # The child workstream's own history: its determinism is checked too.
        child = await dev_runner.client.get_workflow_handle(
            f"{history.workflow_id}.ws-1"
        ).fetch_history()
        histories.append((f"{name}.ws-1", child))
    assert await replay(histories) == []
    if RECORD:
        for _, each in histories:
            save_history(each, HISTORIES)
