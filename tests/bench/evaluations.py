"""The evaluations section: an evaluation's runs per second over archived runs.

``runs`` pipeline runs (worker/examples/pipeline.yaml: two tool nodes, an edge
condition, an output node) run live first, each with its run document as a
gateway start writes it, on the real worker with the archive path of a deployed
worker (outbox, batching archiver). Then one evaluation forks every one of them
with ``tools`` recorded (``on_miss`` fail: a tool asked anything new fails the
fork, so no live tool call happens unless allowed), compares each fork with its
source and runs one JMESPath check (docs/replay-and-compare.md#evaluations).

Figures: the evaluation's wall time and runs per second, its generations (one
per page: continue-as-new) with the history events of the largest and the
median one, the outcomes, and the tool executions during the evaluation (0
expected). Shared by ``tests/integration/test_evaluation_scale.py`` (1,000 runs,
once) and the benchmark command (200 runs).
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.evaluations import (
    EVALUATION_WORKFLOW,
    EvaluationCheck,
    EvaluationInput,
    EvaluationResult,
)
from spindle.shared.contracts.forks import ForkRequest
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.evaluations import EvaluationStore, summarize
from spindle.shared.store.run_document import RunRecord
from spindle.worker.examples import load_example
from spindle.worker.main import build_worker
from spindle.worker.tools.registry import ToolDef
from tests.bench.node_cost import archiving

TASK_QUEUE = "bench-evaluations"
TEXTS = ["a great happy day", "a plain day", "a bad slow day"]


@asynccontextmanager
async def counted_tool_calls() -> AsyncIterator[list[str]]:
    """Every tool execution in this process while the block runs (by tool name)."""
    calls: list[str] = []
    original = ToolDef.call

    async def counted(self: ToolDef, *args: Any, **kwargs: Any) -> Any:
        calls.append(self.name)
        return await original(self, *args, **kwargs)

    ToolDef.call = counted  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        ToolDef.call = original  # type: ignore[method-assign]


async def _source(
    client: Client, archive: RunArchive, tenant: str, index: int, task_queue: str
) -> str:
    text = f"{TEXTS[index % len(TEXTS)]} {index}"
    workflow_id = f"bench-eval-src-{uuid.uuid4().hex[:12]}"
    now = datetime.now(UTC)
    await archive.create_run(
        RunRecord(
            workflow_id=workflow_id,
            run_id="",
            tenant_id=tenant,
            graph_name="pipeline",
            status="running",
            input={"text": text},
            created_at=now,
            updated_at=now,
        )
    )
    handle = await client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=load_example("pipeline"), input={"text": text}, tenant_id=tenant),
        id=workflow_id,
        task_queue=task_queue,
        result_type=GraphRunResult,
    )
    await handle.result()
    return workflow_id


async def _sources(
    client: Client, archive: RunArchive, tenant: str, runs: int, task_queue: str
) -> list[str]:
    gate = asyncio.Semaphore(32)

    async def one(index: int) -> str:
        async with gate:
            return await _source(client, archive, tenant, index, task_queue)

    return list(await asyncio.gather(*(one(i) for i in range(runs))))


async def _generation_sizes(client: Client, workflow_id: str) -> list[int]:
    """History events of each generation of a workflow, latest first."""
    sizes: list[int] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        sizes.append(len(history.events))
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.continued_execution_run_id or None
        if run_id is None:
            return sizes


async def evaluate_archived(
    client: Client,
    settings: Settings,
    *,
    runs: int,
    concurrency: int = 10,
    page_size: int = 50,
) -> dict[str, Any]:
    """Run ``runs`` sources, then evaluate them all (see the module docstring)."""
    # One tenant of its own: its run-start permits are no other test's.
    tenant = f"bench-eval-{uuid.uuid4().hex[:8]}"
    settings = settings.model_copy(update={"rate_limit_run_starts": 100_000})
    task_queue = f"{TASK_QUEUE}-{uuid.uuid4().hex[:6]}"
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue=task_queue)
    try:
        async with archiving(bus, archive, settings), worker:
            began = time.perf_counter()
            sources = await _sources(client, archive, tenant, runs, task_queue)
            sources_s = time.perf_counter() - began
            evaluation_id = f"eval-{uuid.uuid4().hex}"
            store = EvaluationStore(archive.database)
            await store.create(
                evaluation_id,
                tenant_id=tenant,
                user_id=None,
                request={},
                graph="pipeline",
                source_ids=sources,
            )
            params = EvaluationInput(
                evaluation_id=evaluation_id,
                tenant_id=tenant,
                fork=ForkRequest(tools="recorded", llm="recorded", on_miss="fail"),
                checks=[EvaluationCheck(name="same", expr="source.output == candidate.output")],
                total=len(sources),
                concurrency=concurrency,
                page_size=page_size,
            )
            async with counted_tool_calls() as calls:
                began = time.perf_counter()
                result = await client.execute_workflow(
                    EVALUATION_WORKFLOW,
                    params,
                    id=evaluation_id,
                    task_queue=task_queue,
                    result_type=EvaluationResult,
                )
                duration_s = time.perf_counter() - began
            sizes = await _generation_sizes(client, evaluation_id)
            summary = summarize(await store.entries(evaluation_id))
    finally:
        await bus.close()
        await archive.close()
    return {
        "runs": runs,
        "status": result.status,
        "sources_s": round(sources_s, 2),
        "duration_s": round(duration_s, 2),
        "runs_per_s": round(runs / duration_s, 2),
        "concurrency": concurrency,
        "page_size": page_size,
        "generations": len(sizes),
        "history_events_max": max(sizes),
        "history_events_median": statistics.median(sizes),
        "same": summary.same,
        "changed": summary.changed,
        "failed": summary.failed,
        "pending": summary.pending,
        "check_same_passed": summary.checks["same"].passed if "same" in summary.checks else 0,
        "tool_executions": len(calls),
    }


async def bench_evaluations(client: Client, settings: Settings, *, runs: int) -> dict[str, Any]:
    """The benchmark's evaluations section (200 archived runs by default)."""
    return await evaluate_archived(client, settings, runs=runs)
