"""A ``GraphRun`` as someone might "improve" it, for the replay drift test.

Its own module, free of pytest: the workflow sandbox re-imports the module that
defines a workflow, and importing pytest there races with other threads'
imports (seen as a KeyError in importlib's module locks).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.worker.workflows.graph_run import GraphRun

with workflow.unsafe.imports_passed_through():
    from spindle.worker.contracts import NodeOutcome
    from spindle.worker.workflows.run_engine import RunEngine
    from spindle.worker.workflows.scheduler import Activation


class DriftedEngine(RunEngine):
    """The run's logic as someone might "improve" it: nodes run a renamed activity."""

    async def _execute(self, activation: Activation) -> NodeOutcome:
        outcome: NodeOutcome = await workflow.execute_activity(
            "execute_node_v2",
            activation.node_id,
            result_type=NodeOutcome,
            activity_id=f"{activation.node_id}.{activation.visit}",
            start_to_close_timeout=timedelta(seconds=30),
        )
        return outcome


@workflow.defn(name=GRAPH_RUN_WORKFLOW)
class DriftedGraphRun(GraphRun):
    """GraphRun with the drifted engine."""

    engine = DriftedEngine

    @workflow.run
    async def run(self, run_input: GraphRunInput) -> GraphRunResult:
        return await super().run(run_input)
