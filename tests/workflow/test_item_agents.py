"""An ``agent`` per item of a ``map`` (seed 001), through ``GraphRun`` with the real worker.

The items' agents ask the offline model, which calls the calculator and answers;
1,000 items run in batches with at most ``concurrency`` LLM loops at once, each
item's spend is in its ``usage`` and counted against the run's budget, and the
run's history stays a constant per batch.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.budgets import RunBudget
from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    NodeStatus,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform import metrics
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker
from spindle.worker.offerings import build_catalog
from tests.workflow.runs import GraphRunner, M

pytestmark = pytest.mark.workflow

ITEMS = 1_000
CONCURRENCY = 8


def agent_map(**node_params: Any) -> GraphSpec:
    spec = parse_graph(
        {
            "name": "item-agents",
            "entry": "solve",
            "nodes": [
                {
                    "id": "solve",
                    "type": "map",
                    "params": {
                        "over": "input",
                        "concurrency": CONCURRENCY,
                        "batch_size": 100,
                        "node": {
                            "type": "agent",
                            "params": {
                                "prompt": "What is {{ item }} * 2?",
                                "tools": ["calculator"],
                                "max_turns": 3,
                                **node_params,
                            },
                        },
                    },
                }
            ],
            "edges": [],
        }
    )
    validate_graph(spec, build_catalog())  # the gateway accepts it
    return spec


class _CountingProvider(OfflineProvider):
    """The offline model, counting how many LLM calls are in flight at once."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.most = 0

    async def complete(self, request: LlmRequest) -> LlmResponse:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            await asyncio.sleep(0)  # let the other items' loops in
            return await super().complete(request)
        finally:
            self.now -= 1


LLM = _CountingProvider()


@pytest.fixture(scope="module")
async def runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[GraphRunner]:
    """A worker whose model counts the LLM calls in flight."""
    task_queue = f"wf-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        time_skipping_env.client,
        worker_settings,
        bus=run_bus,
        archive=run_archive,
        llm=LLM,
        task_queue=task_queue,
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive)


async def _start(
    runner: GraphRunner, spec: GraphSpec, run_input: Any
) -> WorkflowHandle[Any, GraphRunResult]:
    return await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, input=run_input, budget=RunBudget(max_llm_tokens=10_000_000)),
        id=f"item-agents-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )


async def test_a_thousand_agent_items_each_answer_within_the_concurrency_bound(
    runner: GraphRunner,
) -> None:
    LLM.most = 0
    queue_before = metrics.ITEMS_QUEUE_LENGTH._value.get()

    handle = await _start(runner, agent_map(), list(range(ITEMS)))
    result = await handle.result()

    output = result.output
    assert (output["succeeded"], output["failed"]) == (ITEMS, 0)
    items = output["items"]
    assert [item["id"] for item in items] == [str(i) for i in range(ITEMS)]
    for number, item in enumerate(items):
        assert f"{number} * 2 = {number * 2}" in item["data"]
        # Its own loop: a turn that called the calculator, a turn that answered.
        usage = item["usage"]
        assert (usage["turns"], usage["tool_calls"]) == (2, 1)
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    # The map's concurrency bounds the LLM loops in flight, over all batches.
    assert 1 < LLM.most <= CONCURRENCY

    # The run's budget counted every item's tokens and tool calls: one call per item
    # admitted by the map, one more per item made by its agent.
    assert result.budget is not None
    spent = result.budget.usage
    assert spent.tool_calls == 2 * ITEMS
    assert spent.llm_tokens == sum(
        i["usage"]["prompt_tokens"] + i["usage"]["completion_tokens"] for i in items
    )
    report = next(r for r in result.node_reports if r.node_id == "solve")
    assert report.status is NodeStatus.SUCCESS

    # History grows per batch (10 of them), never per item or per LLM turn.
    history = await handle.fetch_history()
    assert len(history.events) < 150
    messages = await runner.messages(handle.id)
    assert len([m for m in messages if m["t"] == M.BATCH_PROGRESS]) == ITEMS // 100
    # Every item taken by a batch was also finished: the gauge is back where it was.
    assert metrics.ITEMS_QUEUE_LENGTH._value.get() == queue_before


async def test_an_item_whose_agent_gives_no_answer_in_time_fails_alone(
    runner: GraphRunner,
) -> None:
    # One turn only: the model's first turn calls the calculator, so no item answers.
    handle = await _start(runner, agent_map(max_turns=1), [1, 2, 3])
    result = await handle.result()
    items = result.output["items"]
    assert result.output["failed"] == 3
    assert "no final answer within max_turns (1)" in items[0]["error"]["message"]
    assert items[0]["usage"]["turns"] == 1  # what it spent is counted all the same
    assert result.budget is not None and result.budget.usage.llm_tokens > 0


def test_a_per_item_agent_takes_no_workstreams_mcp_or_user_messages() -> None:
    with pytest.raises(GraphInvalid) as refused:
        agent_map(tools=["launch_workstream"], interactive=True)
    fields = {(e["field"], e["rule"]) for e in refused.value.errors}
    assert ("params.node.params.tools", "not_per_item") in fields
    assert ("params.node.params.interactive", "not_per_item") in fields
