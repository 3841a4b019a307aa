"""The hitl section: a human's answer → the run resumes, against a bare Temporal Update.

A graph of N ``prompt`` nodes in a chain runs through the real worker
(``build_worker``: real activities, Redis bus, Mongo archive). For each prompt,
once it has asked, the bench sends the answer as the ``UserInput`` update (what
``POST …/signal/UserInput`` does after its checks) and times:

- ``answer_update_ms``: the update's round trip (validator, handler: what the
  answering client waits for);
- ``answer_to_resume_ms``: until the run has taken the answer and asked the next
  prompt (``describe`` shows it pending; polled every 2 ms), i.e. ``accept_input``
  (QUESTION posted, node archived, accepted attempt kept) and the next ask.

The floor is a bare workflow whose update handler only counts (``BareUpdates``),
on the same Temporal dev server; the ratios divide each figure by its median.
"""

from __future__ import annotations

import statistics
import time
import uuid
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    DESCRIBE_QUERY,
    GRAPH_RUN_WORKFLOW,
    USER_INPUT_UPDATE,
    GraphRunInput,
    GraphRunResult,
    RunDescription,
    SignalAck,
    UserInput,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from tests.polling import eventually

POLL_S = 0.002


class BareAnswer(BaseModel):
    n: int


@workflow.defn(name="BenchBareUpdates", sandboxed=False)
class BareUpdates:
    """Ends after ``count`` updates; each only counts: the floor of one answer."""

    def __init__(self) -> None:
        self.answered = 0

    @workflow.run
    async def run(self, count: BareAnswer) -> BareAnswer:
        await workflow.wait_condition(lambda: self.answered >= count.n)
        return BareAnswer(n=self.answered)

    @workflow.update(name="answer")
    async def answer(self, answer: BareAnswer) -> BareAnswer:
        self.answered += 1
        return answer


def prompt_chain(prompts: int) -> dict[str, Any]:
    return {
        "name": "bench-prompts",
        "entry": "p1",
        "nodes": [
            {"id": f"p{i}", "type": "prompt", "params": {"prompt": f"Answer {i}?"}}
            for i in range(1, prompts + 1)
        ],
        "edges": [{"from": f"p{i}", "to": f"p{i + 1}"} for i in range(1, prompts)],
    }


async def _bare_update_ms(client: Client, answers: int) -> list[float]:
    out: list[float] = []
    async with Worker(client, task_queue="bench-bare-updates", workflows=[BareUpdates]):
        handle = await client.start_workflow(
            BareUpdates.run,
            BareAnswer(n=answers + 1),
            id=f"bare-updates-{uuid.uuid4()}",
            task_queue="bench-bare-updates",
        )
        await handle.execute_update(BareUpdates.answer, BareAnswer(n=0))  # warm
        for i in range(answers):
            start = time.perf_counter()
            await handle.execute_update(BareUpdates.answer, BareAnswer(n=i + 1))
            out.append((time.perf_counter() - start) * 1000)
        await handle.result()
    return out


async def _pending_node(handle: WorkflowHandle[Any, Any]) -> str | None:
    described = await handle.query(DESCRIBE_QUERY, result_type=RunDescription)
    return described.pending_input.node_id if described.pending_input else None


async def _asked(handle: WorkflowHandle[Any, Any], node_id: str) -> None:
    async def asked() -> bool:
        return await _pending_node(handle) == node_id

    await eventually(asked, what=f"the run asks '{node_id}'", timeout=60, interval=POLL_S)


async def bench_hitl(client: Client, settings: Settings, *, prompts: int) -> dict[str, Any]:
    from spindle.shared.graphs.structure import parse_graph
    from spindle.worker.main import build_worker

    floor = await _bare_update_ms(client, prompts)
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    await archive.ensure_indexes()
    spec = parse_graph(prompt_chain(prompts + 1))
    update_ms: list[float] = []
    resume_ms: list[float] = []
    worker = build_worker(client, settings, bus=bus, archive=archive, task_queue="bench-hitl")
    async with worker:
        handle = await client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=spec, input={}),
            id=f"bench-hitl-{uuid.uuid4()}",
            task_queue="bench-hitl",
            result_type=GraphRunResult,
        )
        for i in range(1, prompts + 2):
            await _asked(handle, f"p{i}")
            start = time.perf_counter()
            await handle.execute_update(
                USER_INPUT_UPDATE, UserInput(message=f"a{i}"), result_type=SignalAck
            )
            answered = time.perf_counter()
            if i <= prompts:
                await _asked(handle, f"p{i + 1}")
                if i > 1:  # the first answer warms caches and the sandbox
                    update_ms.append((answered - start) * 1000)
                    resume_ms.append((time.perf_counter() - start) * 1000)
        await handle.result()
    await bus.close()
    await archive.close()
    floor_ms = statistics.median(floor)
    update = statistics.median(update_ms)
    resume = statistics.median(resume_ms)
    return {
        "answers": len(update_ms),
        "bare_update_ms": round(floor_ms, 2),
        "answer_update_ms": round(update, 2),
        "answer_to_resume_ms": round(resume, 2),
        "update_ratio": round(update / floor_ms, 2),
        "resume_ratio": round(resume / floor_ms, 2),
    }
