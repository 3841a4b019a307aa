"""Agents remember (docs/conversations.md, Memory), on the time-skipping server with
the real activities and Redis: a node revisited in a loop continues its own
conversation (``per_visit`` starts empty), the runs of one conversation share
their agents' memory (``none`` opts out), and a summary survives continue-as-new."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.platform.settings import Settings
from spindle.shared.store.agent_memory import AgentMemory, thread_memory_base
from spindle.shared.store.archive import RunArchive
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.llm.context_policy import SUMMARY_HEADER
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow


class RecordingModel(OfflineProvider):
    """The offline model; remembers each request (by the workflow that made it)."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(request)
        return super().respond(request)

    def tokens(self, marker: str) -> list[int]:
        """Prompt tokens (as the offline model counts them) of the requests whose
        latest user message holds ``marker``."""
        seen = []
        for request in self.requests:
            users = [m for m in request.messages if m.role == "user"]
            if users and marker in (users[-1].content or ""):
                seen.append(sum(len((m.content or "").split()) for m in request.messages))
        return seen


@pytest.fixture(scope="module")
async def memory_runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[tuple[GraphRunner, RecordingModel]]:
    model = RecordingModel()
    task_queue = f"wf-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        time_skipping_env.client,
        worker_settings.model_copy(update={"llm_streaming": False}),
        bus=run_bus,
        archive=run_archive,
        llm=model,
        task_queue=task_queue,
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive), model


def loop_graph(marker: str, visits: int, **params: Any) -> GraphSpec:
    spec = parse_graph(
        {
            "name": "memory-loop",
            "entry": "chat",
            "nodes": [
                {
                    "id": "chat",
                    "type": "agent",
                    "params": {"prompt": f"{marker} tell me more", **params},
                },
                {"id": "done", "type": "output"},
            ],
            "edges": [
                *([{"from": "chat", "to": "chat", "max_iterations": visits - 1}] * (visits > 1)),
                {"from": "chat", "to": "done"},
            ],
        }
    )
    validate_structure(spec)
    return spec


async def run(
    runner: GraphRunner, spec: GraphSpec, *, memo: dict[str, Any] | None = None, **extra: Any
) -> str:
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, **extra),
        id=f"memory-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
        memo=memo,
    )
    await handle.result()
    return handle.id


async def test_a_revisited_agent_continues_its_conversation(
    memory_runner: tuple[GraphRunner, RecordingModel],
) -> None:
    runner, model = memory_runner
    await run(runner, loop_graph("loop-a", 4))
    grown = model.tokens("loop-a")
    assert len(grown) == 4
    assert grown == sorted(grown) and len(set(grown)) == 4, grown

    await run(runner, loop_graph("loop-b", 4, memory="per_visit"))
    fresh = model.tokens("loop-b")
    assert len(fresh) == 4 and len(set(fresh)) == 1, fresh


async def test_the_runs_of_a_conversation_share_their_agents_memory(
    memory_runner: tuple[GraphRunner, RecordingModel],
) -> None:
    runner, model = memory_runner
    thread = {"conversation": f"c-{uuid.uuid4().hex[:8]}"}
    await run(runner, loop_graph("thread-1", 1), memo=thread)
    await run(runner, loop_graph("thread-2", 1), memo=thread)
    second = [r for r in model.requests if "thread-2" in (r.messages[-1].content or "")]
    assert len(second) == 1
    said = [m.content or "" for m in second[0].messages]
    assert any("thread-1" in text for text in said), "the first run's exchange is remembered"

    other = {"conversation": f"c-{uuid.uuid4().hex[:8]}"}
    await run(runner, loop_graph("alone-1", 1), memo=other)
    await run(runner, loop_graph("alone-2", 1, memory="none"), memo=other)
    alone = [r for r in model.requests if "alone-2" in (r.messages[-1].content or "")]
    assert len(alone) == 1
    assert not any("alone-1" in (m.content or "") for m in alone[0].messages)


async def test_a_summary_survives_continue_as_new(
    memory_runner: tuple[GraphRunner, RecordingModel],
) -> None:
    runner, model = memory_runner
    spec = loop_graph(
        "long-" + "words " * 60, 24, context={"max_tokens": 300, "strategy": "summarize"}
    )
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, continue_as_new_after_events=100),
        id=f"memory-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    result = await handle.result()
    assert result.generation >= 2, "the run continued as new between visits"
    workflow_id = handle.id

    messages = await runner.messages(workflow_id)
    summaries = [
        m for m in messages if m["t"] == AgentMessageType.UPDATE and "Summarized" in m["m"]
    ]
    assert summaries, "dropped messages were summarized"
    last = [r for r in model.requests if "long-" in (r.messages[-1].content or "")][-1]
    assert (last.messages[1].content or "").startswith(SUMMARY_HEADER)


async def test_a_thread_stays_the_memory_after_continue_as_new(
    memory_runner: tuple[GraphRunner, RecordingModel],
) -> None:
    runner, _ = memory_runner
    conversation = f"c-{uuid.uuid4().hex[:8]}"
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=loop_graph("can-thread", 24), continue_as_new_after_events=100),
        id=f"memory-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
        memo={"conversation": conversation},
    )
    result = await handle.result()
    assert result.generation >= 2
    memory = AgentMemory(runner.bus.redis, 3600)
    meta = await memory.meta(thread_memory_base("default", conversation, "chat"))
    assert meta.length == 24 * 2, "every visit of every generation is in the thread"
