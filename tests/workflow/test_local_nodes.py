"""Router and output nodes run as local activities unless the node says otherwise,
and so does the run's ``finish_run``.

Temporal's history says how each node ran: an activity has an ActivityTaskScheduled
event with its id, a local activity only a marker. The messages and the result are
the same either way.
"""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import WorkflowHandle

from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.temporal_history import executed_activities
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


async def how_they_ran(handle: WorkflowHandle[Any, Any]) -> list[tuple[str, bool]]:
    """(activity id, ran locally) of each activity the run executed, in order."""
    history = await handle.fetch_history()
    return [(e.activity_id, e.local) for e in executed_activities(history)]


async def test_router_and_output_run_as_local_activities(runner: GraphRunner) -> None:
    handle = await runner.start(routed_graph({}))
    result = await handle.result()
    assert result.status == RunStatus.COMPLETED
    assert result.output == {"n": 3}

    # The tool is an activity on the task queue; the router, the output and the
    # run's finish ran on the run's worker.
    assert await how_they_ran(handle) == [
        ("words.1", False),
        ("route.1", True),
        ("done.1", True),
        ("finish", True),
    ]
    messages = await runner.messages(handle.id)
    answers = [m["m"] for m in messages if m["t"] == AgentMessageType.ANSWER]
    assert answers == ["3 words"]
    assert any(m["m"] == "Route: long" for m in messages if m["t"] == AgentMessageType.UPDATE)
    assert types_of(messages)[-1] == AgentMessageType.COMPLETE


async def test_a_node_that_says_local_false_runs_as_an_activity(runner: GraphRunner) -> None:
    handle = await runner.start(routed_graph({"local": False}))
    result = await handle.result()
    assert result.output == {"n": 3}

    assert await how_they_ran(handle) == [
        ("words.1", False),
        ("route.1", True),
        ("done.1", False),
        ("finish", True),
    ]
    messages = await runner.messages(handle.id)
    assert [m["m"] for m in messages if m["t"] == AgentMessageType.ANSWER] == ["3 words"]
