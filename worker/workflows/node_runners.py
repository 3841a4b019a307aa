"""``NodeRunners``: how a run runs one node, by its type's ``NodeTypeSpec.runs``.

An activity node is one ``execute_node`` activity; an agent is the agent loop with
the run's session hooks; a ``workstream`` node is a child workflow; a human-input
node is a prompt; a ``map`` is its batches. Each first asks the run's budget: a
tool node or map item is counted before it starts, and nothing starts while the
run is held at a cap (docs/graphs/budgets.md).

Runs inside the workflow sandbox: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.graphs.node_types import TOOL, NodeTypeSpec, RunKind
    from spindle.worker.contracts import NodeExecution, NodeOutcome
    from spindle.worker.workflows.agent_loop import run_agent
    from spindle.worker.workflows.agent_session import AgentSessions
    from spindle.worker.workflows.budget_meter import BudgetMeter
    from spindle.worker.workflows.human_input import HumanInput
    from spindle.worker.workflows.map_batches import run_map
    from spindle.worker.workflows.node_activity import execute_node
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor
    from spindle.worker.workflows.workstreams.parent_tools import (
        offered_tools,
        workstream_toolbox,
    )


class NodeRunners:
    """Runs a node of any kind with the run's collaborators.

    Args:
        budget: the run's meter (counts and holds steps).
        workstreams: the run's supervisor (child workflows, the workstream tools).
        prompts: the run's prompts.
        agents: the main workstream's agent sessions (user messages, IDLE waits).
    """

    def __init__(
        self,
        budget: BudgetMeter,
        workstreams: WorkstreamSupervisor,
        prompts: HumanInput,
        agents: AgentSessions,
    ) -> None:
        self._budget = budget
        self._workstreams = workstreams
        self._prompts = prompts
        self._agents = agents

    async def run(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        """Run the node by its kind (an unknown type runs as an activity)."""
        kind = spec.runs if spec is not None else RunKind.ACTIVITY
        return await RUNNERS[kind](self, execution, spec)

    async def _activity(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        if execution.node.type == TOOL.name:  # a tool node is one tool call for budgets
            await self._budget.take_tools(1)  # counted before it starts
        else:
            await self._budget.hold()  # nothing starts while the run is paused
        return await execute_node(execution, spec)

    async def _prompt(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        return await self._prompts.ask(execution)

    async def _workstream(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        await self._budget.hold()  # a child launch waits while the run is paused
        return await self._workstreams.run_node(execution)

    async def _map(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        # Each item runs the map's inline node: one tool call per item for budgets,
        # counted as the batches are dispatched (the map pauses mid-way at the cap).
        await self._budget.gate("tool")
        return await run_map(execution, spec, meter=self._budget)

    async def _agent(self, execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
        node_id = execution.node.id
        toolbox = workstream_toolbox(self._workstreams, offered_tools(execution), node_id)
        session = self._agents.open(execution)
        try:
            return await run_agent(
                execution,
                toolbox=toolbox,
                hooks=session,
                meter=self._budget,
                id_prefix=session.loop_id,
                resume=session.resume,
            )
        finally:
            self._agents.close(session)


Runner = Callable[[NodeRunners, NodeExecution, NodeTypeSpec | None], Awaitable[NodeOutcome]]

RUNNERS: dict[RunKind, Runner] = {
    RunKind.ACTIVITY: NodeRunners._activity,
    RunKind.AGENT_LOOP: NodeRunners._agent,
    RunKind.HUMAN_INPUT: NodeRunners._prompt,
    RunKind.WORKSTREAM: NodeRunners._workstream,
    RunKind.MAP: NodeRunners._map,
}
"""How a run runs a node, by its type's ``NodeTypeSpec.runs``."""
