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
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from spindle.shared.platform.settings import get_settings
from spindle.shared.temporal.converter import data_converter
from spindle.worker.replay.histories import load_histories


@dataclass(frozen=True)
class ReplayFailure:
    """A history the current code cannot replay, and why."""

    source: str
    workflow_id: str
    run_id: str
    error: str


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
