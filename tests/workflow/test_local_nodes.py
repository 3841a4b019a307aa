"""Router and output nodes run as local activities unless the node says otherwise,
and so does the run's ``finish_run``.

Temporal's history says how each node ran: an activity has an ActivityTaskScheduled
event with its id, a local activity only a marker. The messages and the result are
the same either way.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.workflow.runs import GraphRunner, types_of

pytestmark = pytest.mark.workflow


def routed_graph(output: dict[str, Any]) -> Any:
    spec = parse_graph(
        {
            "name": "local-nodes",
            "entry": "words",
            "nodes": [
                {
                    "id": "words",
                    "type": "tool",
                    "params": {"tool": "word_count", "args": {"text": "a b c"}},
                },
                {
                    "id": "route",
                    "type": "router",
                    "params": {"routes": [{"when": "words.words > `2`", "port": "long"}]},
                },
                {
                    "id": "done",
                    "type": "output",
                    "params": {"select": "{n: words.words}", "message": "{{ words.words }} words"},
                    **output,
                },
            ],
            "edges": [
                {"from": "words", "to": "route"},
                {"from": "route", "to": "done", "from_port": "long"},
            ],
        }
    )
    validate_structure(spec)
    return spec


async def how_they_ran(handle: WorkflowHandle[Any, Any]) -> tuple[set[str], int]:
    """(ids of the activities scheduled on a task queue, local activity markers)."""
    scheduled: set[str] = set()
    markers = 0
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled.add(event.activity_task_scheduled_event_attributes.activity_id)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            markers += 1
    return scheduled, markers


async def test_router_and_output_run_as_local_activities(runner: GraphRunner) -> None:
    handle = await runner.start(routed_graph({}))
    result = await handle.result()
    assert result.status == RunStatus.COMPLETED
    assert result.output == {"n": 3}

    scheduled, markers = await how_they_ran(handle)
    # The tool is an activity; the router, the output and the run's finish are not
    # scheduled on a queue: a marker each (and one for each patch).
    assert scheduled == {"words.1"}
    assert markers >= 3
    messages = await runner.messages(handle.id)
    answers = [m["m"] for m in messages if m["t"] == AgentMessageType.ANSWER]
    assert answers == ["3 words"]
    assert any(m["m"] == "Route: long" for m in messages if m["t"] == AgentMessageType.UPDATE)
    assert types_of(messages)[-1] == AgentMessageType.COMPLETE


async def test_a_node_that_says_local_false_runs_as_an_activity(runner: GraphRunner) -> None:
    handle = await runner.start(routed_graph({"local": False}))
    result = await handle.result()
    assert result.output == {"n": 3}

    scheduled, _ = await how_they_ran(handle)
    assert scheduled == {"words.1", "done.1"}
    messages = await runner.messages(handle.id)
    assert [m["m"] for m in messages if m["t"] == AgentMessageType.ANSWER] == ["3 words"]
