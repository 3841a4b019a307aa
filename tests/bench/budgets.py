"""Budget accounting overhead: ms per LLM turn of an agent with a budget vs without.

The same agent (a scripted offline model that calls the calculator on every turn
but the last, and reports token usage) runs ``turns`` turns, alternately with a
budget whose caps are never reached and without one. Accounting happens in the
workflow from each turn's recorded result, so the difference is the cost of
counting and of the gate before each step: no extra activity, timer or signal.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.budgets import RunBudget
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import LlmRequest, LlmResponse, LlmUsage
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker

QUEUE = "bench-budgets"


class ToolEveryTurn(OfflineProvider):
    """Calls the calculator on every turn but the last; reports usage like a real model."""

    def __init__(self, turns: int) -> None:
        super().__init__()
        self.turns = turns

    def respond(self, request: LlmRequest) -> LlmResponse:
        turn = sum(m.role == "assistant" for m in request.messages) + 1
        usage = LlmUsage(prompt_tokens=20, completion_tokens=5)
        if turn < self.turns:
            call = ToolCall(id=f"c{turn}", name="calculator", arguments={"expression": "1 + 1"})
            message = ChatMessage(role="assistant", content=f"step {turn}", tool_calls=[call])
        else:
            message = ChatMessage(role="assistant", content="done")
        return LlmResponse(message=message, model="bench", usage=usage)


def _graph(turns: int) -> dict[str, Any]:
    return {
        "name": "bench-budget",
        "entry": "agent",
        "nodes": [
            {
                "id": "agent",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": turns, "prompt": "count"},
            }
        ],
        "edges": [],
    }


async def bench_budgets(
    client: Client, settings: Settings, *, turns: int, repeat: int
) -> dict[str, Any]:
    """Median ms per LLM turn (with its tool call) with and without a budget, and the ratio."""
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    spec = parse_graph(_graph(turns))
    budget = RunBudget(max_llm_tokens=10**9, max_tool_calls=10**6, max_cost_usd=10**6)
    timings: dict[str, list[float]] = {"without": [], "with": []}
    worker = build_worker(
        client, settings, bus=bus, archive=archive, llm=ToolEveryTurn(turns), task_queue=QUEUE
    )
    async with worker:
        for i in range(repeat + 1):
            for label, run_budget in (("without", None), ("with", budget)):
                start = time.perf_counter()
                result = await client.execute_workflow(
                    GRAPH_RUN_WORKFLOW,
                    GraphRunInput(graph=spec, budget=run_budget),
                    id=f"bench-budget-{uuid.uuid4()}",
                    task_queue=QUEUE,
                    result_type=GraphRunResult,
                )
                if result.status != "completed":
                    raise RuntimeError(f"budget bench run ended {result.status}: {result.error}")
                if i:  # the first pair warms caches and the sandbox
                    timings[label].append((time.perf_counter() - start) * 1000 / turns)
    await bus.close()
    await archive.close()
    without = statistics.median(timings["without"])
    with_budget = statistics.median(timings["with"])
    return {
        "turns_per_run": turns,
        "turn_ms_without_budget": round(without, 2),
        "turn_ms_with_budget": round(with_budget, 2),
        "budget_overhead_ratio": round(with_budget / without, 3),
    }
