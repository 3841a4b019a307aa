"""A node run by the ``execute_node`` activity: tool, router, output and custom nodes.

Remote on the node's task queue by default; as a local activity (on the run's
own worker, no trip through the task queue) when the node says ``local: true``
or its type runs locally by default (router, output: pure and quick). Runs
recorded before the types' default (``PURE_NODES_LOCAL_PATCH``) replay remote.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.runs import PURE_NODES_LOCAL_PATCH
    from spindle.shared.graphs.node_types import NodeTypeSpec
    from spindle.worker.contracts import EXECUTE_NODE, NodeExecution, NodeOutcome, policies


async def execute_node(execution: NodeExecution, spec: NodeTypeSpec | None) -> NodeOutcome:
    """Run the node's ``execute_node`` activity (local or remote, see the module docstring).

    Raises:
        temporalio.exceptions.ActivityError: the node failed after its retries.
    """
    node = execution.node
    activity_id = f"{node.id}.{execution.visit}"
    retry = policies.node_retry(node, policies.type_retry(spec))
    # A type's default (router, output) is new: runs recorded before it replay remote.
    if policies.runs_local(node, spec) and (node.local or workflow.patched(PURE_NODES_LOCAL_PATCH)):
        result: NodeOutcome = await workflow.execute_local_activity(
            EXECUTE_NODE,
            execution,
            result_type=NodeOutcome,
            activity_id=activity_id,
            start_to_close_timeout=policies.node_timeout(node, spec),
            retry_policy=retry,
        )
        return result
    remote: NodeOutcome = await workflow.execute_activity(
        EXECUTE_NODE,
        execution,
        result_type=NodeOutcome,
        activity_id=activity_id,
        start_to_close_timeout=policies.node_timeout(node, spec),
        heartbeat_timeout=policies.node_heartbeat(node),
        retry_policy=retry,
        task_queue=node.task_queue,
        priority=policies.node_priority(node),
    )
    return remote
