"""A ``workstream`` node: launch a child, and with ``wait`` its outcome once it has ended.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.runs import NodeReport, NodeStatus
    from spindle.shared.contracts.workstreams import LaunchRequest
    from spindle.shared.graphs.node_params import WorkstreamParams
    from spindle.shared.graphs.node_types import WORKSTREAM
    from spindle.worker.contracts import NodeExecution, NodeOutcome
    from spindle.worker.contracts.param_resolution import resolve_params, validate_params
    from spindle.worker.workflows.expression_budget import task_budget

if TYPE_CHECKING:
    from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor


async def run_workstream_node(
    supervisor: WorkstreamSupervisor, execution: NodeExecution
) -> NodeOutcome:
    """Launch; output ``{launch_id, child_workflow_id}`` at once, or with ``wait`` the
    child's ``WorkstreamOutcome`` once it has ended."""
    node = execution.node
    started = workflow.now()
    raw = resolve_params(
        node, execution.state, templates=WORKSTREAM.templates, budget=task_budget()
    )
    params = validate_params(node, raw, WorkstreamParams)
    ack = await supervisor.launch(LaunchRequest.model_validate(params.model_dump(exclude={"wait"})))
    output: dict[str, Any] = {
        "launch_id": ack.launch_id,
        "child_workflow_id": ack.child_workflow_id,
    }
    summary = f"{ack.launch_id} launched"
    if params.wait:
        child = supervisor.known(ack.launch_id)
        await workflow.wait_condition(lambda: child.settled)
        assert child.outcome is not None
        output = child.outcome.model_dump(mode="json")
        summary = f"{ack.launch_id} {child.outcome.state.value}"
    report = NodeReport(
        node_id=node.id,
        node_type=node.type,
        status=NodeStatus.SUCCESS,
        visit=execution.visit,
        started_at=execution.started_at,
        duration_ms=(workflow.now() - started).total_seconds() * 1000,
        output_summary=summary,
    )
    return NodeOutcome(output=output, report=report)
