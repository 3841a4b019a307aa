"""A workflow's history replays with the current code, and is kept as a recorded one.

Tests that drive a workflow end to end end with ``replays_and_is_recorded``: with
``SPINDLE_RECORD_HISTORIES=1`` (``python tests/histories/record.py``) the history is
written to ``tests/histories/<name>.json``, which ``tests/replay/test_replay.py``
replays with every later version of the workflow (docs/testing.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from temporalio.client import Client, WorkflowHistory

from spindle.worker.replay.histories import save_history
from spindle.worker.replay.replayer import replay

HISTORIES = Path(__file__).resolve().parent / "histories"
RECORD = os.environ.get("SPINDLE_RECORD_HISTORIES") == "1"


async def replays_and_is_recorded(temporal: Client, workflow_id: str, name: str) -> None:
    """Assert the latest run of ``workflow_id`` replays; record it as ``name`` when asked."""
    history = await temporal.get_workflow_handle(workflow_id).fetch_history()
    failures = await replay([(workflow_id, history)])
    assert failures == [], [failure.error for failure in failures]
    if RECORD:
        save_history(WorkflowHistory(name, history.events), HISTORIES)
