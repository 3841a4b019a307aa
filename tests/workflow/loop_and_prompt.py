"""A graph whose run continues as new several times while a prompt waits: a loop
of tool nodes on one branch, a prompt on the other (docs/graphs/index.md, long
runs). Shared by the time-skipping tests and the real-server ones."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.client import WorkflowHandle
from temporalio.service import RPCError

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from tests.polling import eventually
from tests.workflow.runs import GraphRunner

LOOPS = 20

LOOP_AND_PROMPT = parse_graph(
    {
        "name": "loop-and-prompt",
        "entry": "start",
        "nodes": [
            {
                "id": "start",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            {"id": "ask", "type": "prompt", "params": {"prompt": "Ship {{ input.topic }}?"}},
            {
                "id": "work",
                "type": "tool",
                "max_visits": LOOPS + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }} again"}},
            },
            {
                "id": "check",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "b"}},
            },
            {
                "id": "done",
                "type": "output",
                "params": {"select": "{answer: ask, words: work, meta: meta}"},
            },
        ],
        "edges": [
            {"from": "start", "to": "ask"},
            {"from": "start", "to": "work"},
            {"from": "work", "to": "check"},
            {"from": "check", "to": "work", "max_iterations": LOOPS},
            {"from": "check", "to": "done"},
            {"from": "ask", "to": "done"},
        ],
    }
)
validate_structure(LOOP_AND_PROMPT)


async def loop_over_prompt_waiting(
    runner: GraphRunner,
    workflow_id: str,
    *,
    graph: GraphSpec = LOOP_AND_PROMPT,
    successes: int = 1 + 2 * (LOOPS + 1),
) -> tuple[WorkflowHandle[Any, GraphRunResult], RunDescription]:
    """Start ``graph`` (a loop beside a prompt ``ask``) continuing as new every 100
    events; wait until the loop is over (``successes`` nodes succeeded) and ``done``
    waits for the prompt's answer, generations later."""
    await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=graph,
            input={"topic": "spindle"},
            continue_as_new_after_events=100,
            history_warning_events=100,
        ),
        id=workflow_id,
        task_queue=runner.task_queue,
    )
    # By id, not by the first run: later generations have their own run ids.
    latest = runner.client.get_workflow_handle(workflow_id, result_type=GraphRunResult)

    async def loop_done_prompt_waiting() -> RunDescription | None:
        try:
            described = await latest.query(
                DESCRIBE_QUERY, result_type=RunDescription, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            return None  # asked the run that was just continuing as new: ask again
        looped = described.report_counts.get("SUCCESS", 0) == successes
        return described if looped and described.current_nodes == ["ask"] else None

    # ``done`` joins the loop and the prompt: it waits for the answer.
    waiting = await eventually(loop_done_prompt_waiting, what="the loop over, the prompt waiting")
    assert waiting.generation >= 3
    return latest, waiting
