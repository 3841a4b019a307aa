"""A graph run's ``GraphRunInput`` as Temporal recorded it in the run's start event.

What a fork starts from (its graph, input, context, meta and the outputs the run
itself reused) and what the run view draws. Shared by the gateway
(``services.run_records.start_input``, which adds the caller's right to read the
run and turns Temporal's RPC failures into problems) and worker activities (the
evaluations workflow's forks: docs/replay-and-compare.md).
"""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from spindle.shared.contracts.errors import Conflict, NotFound
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput


async def recorded_start_input(temporal: Client, workflow_id: str) -> GraphRunInput:
    """The run's ``GraphRunInput``, from its workflow start event.

    Raises:
        NotFound: Temporal does not know the run (or no longer keeps it).
        Conflict: the workflow is not a graph run (a workstream child, say).
        RPCError: any other failure of Temporal's (the caller says what it means).
    """
    handle = temporal.get_workflow_handle(workflow_id)
    try:
        async for event in handle.fetch_history_events():
            started = event.workflow_execution_started_event_attributes
            if started.workflow_type.name != GRAPH_RUN_WORKFLOW:
                # A workstream child (or any other workflow) has another input
                # type: there is no graph to fork.
                raise Conflict(
                    f"run '{workflow_id}' is a {started.workflow_type.name} workflow; "
                    "only graph runs can be forked"
                )
            decoded = await temporal.data_converter.decode(started.input.payloads, [GraphRunInput])
            run_input = decoded[0]
            assert isinstance(run_input, GraphRunInput)
            return run_input
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise NotFound(f"run '{workflow_id}' was not found") from exc
        raise
    raise NotFound(f"run '{workflow_id}' was not found")
