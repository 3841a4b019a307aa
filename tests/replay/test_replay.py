"""Recorded histories replay against the current ``GraphRun``; drift is detected."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow

from shared.run_models import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from worker.replay import load_history, replay_histories
from worker.replay import main as replay_main
from worker.workflows.graph_run import GraphRun

with workflow.unsafe.imports_passed_through():
    from worker.activities.models import NodeOutcome
    from worker.workflows.scheduler import Activation

pytestmark = pytest.mark.workflow

# No resolve(): the sandbox re-imports this module (it defines a workflow class).
HISTORIES = Path(__file__).parent.parent / "histories"
EXAMPLES = ("approval-flow", "delegation", "pipeline", "research-agent")


def history_files() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def test_every_example_has_a_recorded_history() -> None:
    assert {p.stem for p in history_files()} >= {*EXAMPLES, "delegation.ws-1"}
    for path in history_files():
        assert load_history(path).workflow_id == path.stem


async def test_recorded_histories_replay_with_the_current_workflow() -> None:
    failures = await replay_histories(history_files())
    assert failures == [], "\n".join(f"{f.source}: {f.error}" for f in failures)


@workflow.defn(name=GRAPH_RUN_WORKFLOW)
class DriftedGraphRun(GraphRun):
    """GraphRun as someone might "improve" it: nodes now run a renamed activity."""

    @workflow.run
    async def run(self, run_input: GraphRunInput) -> GraphRunResult:
        return await super().run(run_input)

    async def _execute(self, activation: Activation) -> NodeOutcome:
        outcome: NodeOutcome = await workflow.execute_activity(
            "execute_node_v2",
            activation.node_id,
            result_type=NodeOutcome,
            activity_id=f"{activation.node_id}.{activation.visit}",
            start_to_close_timeout=timedelta(seconds=30),
        )
        return outcome


async def test_a_non_deterministic_change_is_detected() -> None:
    failures = await replay_histories([HISTORIES / "pipeline.json"], workflows=[DriftedGraphRun])
    assert len(failures) == 1
    assert failures[0].workflow_id == "pipeline"
    error = failures[0].error
    assert error.startswith("NondeterminismError")
    assert (
        "'execute_node' does not match activity type of activity command 'execute_node_v2'" in error
    )


def test_replay_command_reports_success_for_the_recorded_histories(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [str(p) for p in history_files()]
    assert replay_main(files) == 0
    assert f"{len(files)}/{len(files)} histories replayed" in capsys.readouterr().out
