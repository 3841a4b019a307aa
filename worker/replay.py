"""Replaying recorded run histories against the current workflow code.

A change to ``GraphRun`` that would break runs in flight (a different activity, a
different order of commands) makes replay of an older history fail with a
non-determinism error. Histories are JSON files written with
``WorkflowHistory.to_json()``; the file stem is the run's workflow id, followed by
``~<generation>`` for the second and later runs of a run that continued as new
(each generation's history replays on its own: its first event holds the carried
state).

A run bundle (``GET /runs/{id}/bundle`` saved to a file) replays too: its
``history`` holds one history per generation, and each is replayed.

Usage: ``python -m spindle.worker.replay tests/histories/*.json bundle.json`` (exit
status 1 on any failure). Tests replay every file under ``tests/histories``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

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
from spindle.shared.platform.settings import get_settings
from spindle.shared.temporal.converter import data_converter


@dataclass(frozen=True)
class ReplayFailure:
    """A history the current code cannot replay, and why."""

    source: str
    workflow_id: str
    run_id: str
    error: str


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


def replayer(workflows: Sequence[type[Any]] | None = None) -> Replayer:
    """A replayer configured like the worker: same sandbox, same data converter."""
    from spindle.worker.main import workflow_classes
    from spindle.worker.sandbox import workflow_runner

    return Replayer(
        workflows=list(workflows) if workflows is not None else workflow_classes(),
        workflow_runner=workflow_runner(),
        data_converter=data_converter(get_settings()),
    )


async def replay_histories(
    paths: Iterable[str | Path], *, workflows: Sequence[type[Any]] | None = None
) -> list[ReplayFailure]:
    """Replay each history file; return one failure per history that does not replay.

    Args:
        paths: history JSON files.
        workflows: workflow classes to replay with; default: the worker's.
    """
    histories = [labelled for p in paths for labelled in load_histories(p)]
    return await replay(histories, workflows=workflows)


async def replay(
    histories: Iterable[tuple[str, WorkflowHistory]],
    *,
    workflows: Sequence[type[Any]] | None = None,
) -> list[ReplayFailure]:
    """Replay in-memory histories, labelled by a source name (file, run)."""
    items = list(histories)
    source_by_run = {h.run_id: (source, h) for source, h in items}

    async def each() -> AsyncIterator[WorkflowHistory]:
        for _, history in items:
            yield history

    results = await replayer(workflows).replay_workflows(each(), raise_on_replay_failure=False)
    failures = []
    for run_id, error in results.replay_failures.items():
        source, history = source_by_run[run_id]
        failures.append(
            ReplayFailure(
                source=source,
                workflow_id=history.workflow_id,
                run_id=run_id,
                error=f"{type(error).__name__}: {error}",
            )
        )
    return sorted(failures, key=lambda f: f.source)


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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spindle.worker.replay FILE...``: replay history files, report failures."""
    paths = list(argv if argv is not None else sys.argv[1:])
    if not paths:
        print("usage: python -m spindle.worker.replay HISTORY_OR_BUNDLE.json...", file=sys.stderr)
        return 2
    histories = [labelled for p in paths for labelled in load_histories(p)]
    failures = asyncio.run(replay(histories))
    for failure in failures:
        print(f"FAIL {failure.source} ({failure.workflow_id}): {failure.error}")
    print(f"{len(histories) - len(failures)}/{len(histories)} histories replayed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
