"""An agent's ``params.output_schema`` (docs/graphs/node-types.md, Structured output), on
the time-skipping server with the real activities: a fitting answer becomes the node's
parsed output; a violation is sent back once with the error; a second one fails the node
with ``AgentOutputInvalid`` naming the violation; without the param nothing changes."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.errors import AgentOutputInvalid, from_application_error
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import ChatMessage
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["title", "score"],
    "additionalProperties": False,
}


class ScriptedModel(OfflineProvider):
    """Answers each prompt with its script's replies in turn; records every request."""

    def __init__(self) -> None:
        super().__init__()
        self.scripts: dict[str, list[str]] = {}
        self.requests: list[LlmRequest] = []

    def respond(self, request: LlmRequest) -> LlmResponse:
        self.requests.append(request)
        users = [m.content or "" for m in request.messages if m.role == "user"]
        marker = next(k for k in self.scripts if any(k in u for u in users))
        replies = self.scripts[marker]
        text = replies.pop(0) if len(replies) > 1 else replies[0]
        return LlmResponse(message=ChatMessage(role="assistant", content=text), model="offline")

    def asked(self, marker: str) -> list[LlmRequest]:
        return [r for r in self.requests if any(marker in (m.content or "") for m in r.messages)]


@pytest.fixture(scope="module")
async def scripted(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[tuple[GraphRunner, ScriptedModel]]:
    model = ScriptedModel()
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


def agent_graph(marker: str, **params: Any) -> GraphSpec:
    return parse_graph(
        {
            "name": "structured",
            "entry": "judge",
            "nodes": [{"id": "judge", "type": "agent", "params": {"prompt": marker, **params}}],
        }
    )


async def test_a_fitting_answer_is_the_parsed_output(
    scripted: tuple[GraphRunner, ScriptedModel],
) -> None:
    runner, model = scripted
    model.scripts["fits-1"] = ['```json\n{"title": "ok", "score": 3}\n```']
    handle = await runner.start(agent_graph("fits-1", output_schema=SCHEMA))
    result = await handle.result()
    assert result.output == {"title": "ok", "score": 3}
    [request] = model.asked("fits-1")
    notes = [m.content or "" for m in request.messages if m.role == "system"]
    assert any(json.dumps(SCHEMA, sort_keys=True) in note for note in notes)


async def test_a_violation_is_retried_once_with_the_error(
    scripted: tuple[GraphRunner, ScriptedModel],
) -> None:
    runner, model = scripted
    model.scripts["retry-1"] = ['{"title": "ok", "score": "high"}', '{"title": "ok", "score": 9}']
    result = await (await runner.start(agent_graph("retry-1", output_schema=SCHEMA))).result()
    assert result.output == {"title": "ok", "score": 9}
    _, second = model.asked("retry-1")
    fix = second.messages[-1]
    assert fix.role == "user" and "output.score" in (fix.content or "")
    assert second.messages[-2].content == '{"title": "ok", "score": "high"}'


async def test_a_second_violation_fails_the_node_naming_it(
    scripted: tuple[GraphRunner, ScriptedModel],
) -> None:
    runner, model = scripted
    model.scripts["fails-1"] = ["not json at all", '{"title": 5, "score": 1}']
    handle = await runner.start(agent_graph("fails-1", output_schema=SCHEMA))
    with pytest.raises(WorkflowFailureError) as exc:
        await handle.result()
    error = from_application_error(exc.value)
    assert isinstance(error, AgentOutputInvalid), exc.value
    assert "output.title: 5 is not of type 'string'" in error.detail
    assert "'judge'" in error.detail
    assert len(model.asked("fails-1")) == 2, "one retry, then the failure"


async def test_without_output_schema_the_answer_stays_text(
    scripted: tuple[GraphRunner, ScriptedModel],
) -> None:
    runner, model = scripted
    model.scripts["plain-1"] = ['{"title": "ok"}']
    result = await (await runner.start(agent_graph("plain-1"))).result()
    assert result.output == '{"title": "ok"}'
    [request] = model.asked("plain-1")
    assert not any("JSON Schema" in (m.content or "") for m in request.messages)
