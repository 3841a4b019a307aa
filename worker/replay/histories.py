"""Run histories as files and from Temporal: load, save, fetch, record.

Histories are JSON files written with ``WorkflowHistory.to_json()``; the file stem
is the run's workflow id, followed by ``~<generation>`` for the second and later
runs of a run that continued as new. A run bundle (``GET /runs/{id}/bundle`` saved
to a file) holds one history per generation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    SignalAck,
    UserInput,
)


def load_history(path: str | Path) -> WorkflowHistory:
    """A history file written by ``WorkflowHistory.to_json()``; its stem is the id
    (and ``~<generation>`` after a continue-as-new)."""
    file = Path(path)
    workflow_id = file.stem.split("~", 1)[0]
    return WorkflowHistory.from_json(workflow_id, file.read_text(encoding="utf-8"))


def load_histories(path: str | Path) -> list[tuple[str, WorkflowHistory]]:
    """The histories in a file, labelled: one for a history file, one per generation
    for a run bundle (``<file>#<run id>``)."""
    file = Path(path)
    document = json.loads(file.read_text(encoding="utf-8"))
    if not (isinstance(document, dict) and "run" in document and "history" in document):
        return [(str(file), load_history(file))]
    workflow_id = document["run"]["workflow_id"]
    return [
        (
            f"{file}#{generation.get('run_id', n)}",
            WorkflowHistory.from_json(workflow_id, generation),
        )
        for n, generation in enumerate(document["history"] or [], start=1)
    ]


def save_history(history: WorkflowHistory, folder: str | Path, generation: int = 1) -> Path:
    """Write ``history`` as ``<folder>/<workflow id>.json`` (``…~<generation>.json``
    for the second and later runs of a continue-as-new chain)."""
    suffix = f"~{generation}" if generation > 1 else ""
    target = Path(folder) / f"{history.workflow_id}{suffix}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(history.to_json() + "\n", encoding="utf-8")
    return target


async def fetch_history(
    client: Client, workflow_id: str, run_id: str | None = None
) -> WorkflowHistory:
    """The full event history of a run (its latest run when ``run_id`` is None)."""
    return await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()


async def fetch_generations(
    client: Client, workflow_id: str, first_run_id: str
) -> list[WorkflowHistory]:
    """The histories of every run of a continue-as-new chain, oldest first."""
    histories: list[WorkflowHistory] = []
    run_id: str | None = first_run_id
    while run_id:
        history = await fetch_history(client, workflow_id, run_id)
        histories.append(history)
        last = history.events[-1]
        attributes = last.workflow_execution_continued_as_new_event_attributes
        run_id = attributes.new_execution_run_id or None
    return histories


async def record_history(
    client: Client,
    graph: GraphSpec,
    run_input: Any = None,
    *,
    task_queue: str,
    workflow_id: str,
    stream_id: str | None = None,
    answers: Sequence[UserInput] = (),
    wait_seconds: float = 60.0,
) -> WorkflowHistory:
    """Run ``graph`` to its end on a worker polling ``task_queue`` and fetch its history.

    Each of ``answers`` is sent, in order, once the run waits on a prompt.

    Raises:
        TimeoutError: the run did not end within ``wait_seconds``.
    """
    handle = await client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=graph, input=run_input, stream_id=stream_id),
        id=workflow_id,
        task_queue=task_queue,
        result_type=GraphRunResult,
    )
    async with asyncio.timeout(wait_seconds):
        for answer in answers:
            while True:
                described = await handle.query(DESCRIBE_QUERY, result_type=RunDescription)
                if described.pending_input is not None:
                    break
                await asyncio.sleep(0.05)  # poll interval; the timeout bounds the wait
            await handle.execute_update(USER_INPUT_UPDATE, answer, result_type=SignalAck)
        await handle.result()
    return await handle.fetch_history()
