"""A long agent's conversation travels by reference (docs/graphs/index.md, long runs).

An agent of 100 turns (the most ``max_turns`` allows), each calling a tool: every
turn the model must see the whole conversation, yet each ``llm_turn`` activity's
input holds only the messages new since the previous turn, so its history bytes do
not grow with the turn number.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import LLM_TURN, ChatMessage, ToolCall
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

TURNS = 100


class PersistentModel(OfflineProvider):
    """A fake LLM that calls the calculator on every turn but the last one."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []  # messages the model got, per turn

    def respond(self, request: LlmRequest) -> LlmResponse:
        turn = sum(m.role == "assistant" for m in request.messages) + 1
        self.seen.append(len(request.messages))
        if turn < TURNS:
            call = ToolCall(
                id=f"c{turn}", name="calculator", arguments={"expression": f"{turn} * 2"}
            )
            return LlmResponse(
                message=ChatMessage(role="assistant", content=f"step {turn}", tool_calls=[call]),
                model="persistent",
            )
        return LlmResponse(
            message=ChatMessage(role="assistant", content=f"done after {turn} turns"),
            model="persistent",
        )


@pytest.fixture(scope="module")
async def model_runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[tuple[GraphRunner, PersistentModel]]:
    model = PersistentModel()
    task_queue = f"wf-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        time_skipping_env.client,
        worker_settings,
        bus=run_bus,
        archive=run_archive,
        llm=model,
        task_queue=task_queue,
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive), model


async def test_a_hundred_turn_agent_sends_each_turn_only_what_is_new(
    model_runner: tuple[GraphRunner, PersistentModel],
) -> None:
    runner, model = model_runner
    spec = parse_graph(
        {
            "name": "long-agent",
            "entry": "agent",
            "nodes": [
                {
                    "id": "agent",
                    "type": "agent",
                    "params": {"tools": ["calculator"], "max_turns": TURNS, "prompt": "count"},
                }
            ],
            "edges": [],
        }
    )
    validate_structure(spec)
    handle = await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=spec, history_warning_events=300),
        id=f"long-agent-{uuid.uuid4().hex[:8]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )
    result = await handle.result()
    assert result.output == f"done after {TURNS} turns"

    # The model saw the whole conversation every turn: system + user, then
    # (assistant, tool) per earlier turn.
    assert model.seen[-TURNS:] == [2 + 2 * (turn - 1) for turn in range(1, TURNS + 1)]

    history = await handle.fetch_history()
    turn_bytes = [
        sum(p.ByteSize() for p in e.activity_task_scheduled_event_attributes.input.payloads)
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        and e.activity_task_scheduled_event_attributes.activity_type.name == LLM_TURN
    ]
    assert len(turn_bytes) == TURNS
    # Turn 1 carries nothing earlier; from turn 2 on, one reply and one tool result.
    second, last = turn_bytes[1], turn_bytes[-1]
    assert last <= second * 1.10, (second, last)

    messages = await runner.messages(handle.id)
    answers = [m for m in messages if m["t"] == AgentMessageType.ANSWER]
    assert [a["m"] for a in answers] == [f"done after {TURNS} turns"]
    # No node boundary for 100 turns: the history WARNING came while the agent ran.
    warned = [
        i
        for i, m in enumerate(messages)
        if m["t"] == AgentMessageType.WARNING and "history is large" in m["m"]
    ]
    assert len(warned) == 1
    assert warned[0] < messages.index(answers[0])
