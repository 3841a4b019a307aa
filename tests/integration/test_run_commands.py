"""``spindle runs replay`` as a user runs it, against runs made on the session's
Temporal dev server by the real worker. (``runs timeline`` goes through the
gateway: tests/e2e/test_runs_timeline_cli.py.)"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.examples import load_examples
from spindle.worker.main import build_worker
from spindle.worker.replay.histories import record_history
from tests.cli_runner import run_spindle

pytestmark = pytest.mark.integration


@workflow.defn(name=GRAPH_RUN_WORKFLOW)
class TimerFirstGraphRun:
    """A GraphRun from some other code version: it starts with a timer."""

    @workflow.run
    async def run(self, run_input: GraphRunInput) -> GraphRunResult:
        await workflow.sleep(timedelta(milliseconds=1))
        return GraphRunResult(status=RunStatus.COMPLETED)


def spindle(*args: str) -> subprocess.CompletedProcess[str]:
    # The ``settings`` fixture exported SPINDLE_* for the session's servers.
    return run_spindle(*args)


@pytest.fixture(scope="module")
async def pipeline_run(temporal_client: Client, settings: Settings) -> AsyncIterator[str]:
    """The workflow id of a completed ``pipeline`` run made by the real worker."""
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    task_queue = f"runs-cli-{uuid.uuid4().hex[:10]}"
    pipeline = next(g for g in load_examples() if g.name == "pipeline")
    workflow_id = f"runs-cli-pipeline-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=task_queue
        ):
            await record_history(
                temporal_client,
                pipeline,
                {"text": "Terrible outage, angry users"},
                task_queue=task_queue,
                workflow_id=workflow_id,
            )
        yield workflow_id
    finally:
        await bus.close()
        await archive.close()


async def drifted_run(client: Client) -> str:
    """A run whose history today's GraphRun cannot replay."""
    task_queue = f"runs-cli-drift-{uuid.uuid4().hex[:10]}"
    pipeline = next(g for g in load_examples() if g.name == "pipeline")
    workflow_id = f"runs-cli-drift-{uuid.uuid4().hex[:10]}"
    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[TimerFirstGraphRun],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        await client.execute_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=pipeline),
            id=workflow_id,
            task_queue=task_queue,
            result_type=GraphRunResult,
        )
    return workflow_id


def test_a_finished_run_replays_deterministically(pipeline_run: str) -> None:
    result = spindle("runs", "replay", pipeline_run)

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"replayed {pipeline_run}:" in result.stdout
    assert "deterministic" in result.stdout


async def test_replay_of_a_drifted_history_exits_1_with_the_error(
    temporal_client: Client,
) -> None:
    workflow_id = await drifted_run(temporal_client)

    result = spindle("runs", "replay", workflow_id)

    assert result.returncode == 1
    assert f"FAIL {workflow_id}" in result.stdout
    assert "Nondeterminism" in result.stdout


def test_replay_of_an_unknown_run_is_an_error() -> None:
    result = spindle("runs", "replay", f"no-such-run-{uuid.uuid4().hex[:8]}")

    assert result.returncode == 1
    assert result.stderr.startswith("spindle: error: ") and "no run" in result.stderr
