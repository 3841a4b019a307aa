"""Seed 004's context for tools and seed 002's plans, against the real Redis bus.

A tool that declares a ``ToolContext`` parameter gets the calling run's tenant,
user, run and node ids and the run's context, from an agent's ``tool_call`` and
from a ``tool`` node alike; null-valued arguments are dropped before validation;
``update_plan`` posts a PLAN (type 2) message on the run's stream.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from spindle.nodes import ToolContext, tool
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import PlanDetails
from spindle.shared.platform.settings import Settings
from spindle.worker.activities.agent import AgentActivities
from spindle.worker.activities.nodes import NodeActivities
from spindle.worker.contracts import (
    LlmTurnInput,
    NodeExecution,
    RunRef,
    ToolCall,
    ToolCallInput,
)
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.tools.registry import get_tool
from tests.integration.activity_env import env

pytestmark = pytest.mark.integration

SEEN: list[ToolContext] = []


@tool(name="test_ctx_whoami")
def whoami(ctx: ToolContext, label: str = "me") -> dict[str, Any]:
    """Say which run and node called (test tool).

    Args:
        label: echoed back.
    """
    SEEN.append(ctx)
    return {
        "label": label,
        "tenant": ctx.tenant_id,
        "user": ctx.user_id,
        "run": ctx.run_id,
        "node": ctx.node_id,
        "context": ctx.context,
    }


@pytest.fixture(scope="module")
def io_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(redis_url=redis_url, mongo_url=mongo_url, mongo_db="spindle_tool_context")


@pytest.fixture(scope="module")
async def bus(io_settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(io_settings)
    yield bus
    await bus.close()


def new_run() -> RunRef:
    wf = f"ctx-{uuid.uuid4().hex[:12]}"
    return RunRef(
        workflow_id=wf, run_id="r1", stream_id=wf, graph_name="g", tenant_id="acme", user_id="ada"
    )


def execution(run: RunRef, node: dict[str, Any], **state: Any) -> NodeExecution:
    return NodeExecution(
        run=run,
        node=NodeSpec.model_validate(node),
        state={"input": None, "context": {"region": "eu"}, "meta": {}, **state},
        started_at=datetime.now(UTC).isoformat(),
    )


def test_the_context_parameter_is_no_argument_and_nulls_are_dropped() -> None:
    whoami_tool = get_tool("test_ctx_whoami")
    schema = whoami_tool.params_schema()
    assert "ctx" not in schema["properties"] and "ctx" not in schema.get("required", [])
    # A model's explicit null means "the default", for any tool.
    assert get_tool("search_notes").validate({"query": "sse", "limit": None}).limit == 3  # type: ignore[attr-defined]


async def test_an_agent_tool_call_gets_tenant_user_run_node_and_context(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = AgentActivities(bus, None, OfflineProvider(), settings=io_settings)
    ex = execution(run, {"id": "helper", "type": "agent", "params": {"tools": ["test_ctx_whoami"]}})
    call = ToolCall(id="c1", name="test_ctx_whoami", arguments={"label": None})
    result = await env("helper.1.t1.c1").run(
        acts.tool_call, ToolCallInput(execution=ex, turn=1, call=call)
    )
    assert result.ok, result.content
    assert orjson.loads(result.content) == {
        "label": "me",
        "tenant": "acme",
        "user": "ada",
        "run": run.workflow_id,
        "node": "helper",
        "context": {"region": "eu"},
    }


async def test_a_tool_node_gives_its_tool_the_context(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = NodeActivities(bus, None, settings=io_settings)
    node = {
        "id": "who",
        "type": "tool",
        "params": {"tool": "test_ctx_whoami", "args": {"label": "x"}},
    }
    outcome = await env("who.1").run(acts.execute_node, execution(run, node))
    assert outcome.output["user"] == "ada" and outcome.output["node"] == "who"
    assert outcome.output["tenant"] == "acme" and outcome.output["run"] == run.workflow_id


async def test_update_plan_posts_a_plan_message_on_the_stream(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = AgentActivities(bus, None, OfflineProvider(), settings=io_settings)
    ex = execution(run, {"id": "lead", "type": "agent", "params": {"tools": ["update_plan"]}})
    tasks = [
        {"title": "Search the notes", "status": "done"},
        {"title": "Draft the answer", "status": "in_progress"},
        {"title": "Check the numbers"},
    ]
    call = ToolCall(
        id="p1", name="update_plan", arguments={"tasks": tasks, "explanation": "notes found"}
    )
    result = await env("lead.1.t1.p1").run(
        acts.tool_call, ToolCallInput(execution=ex, turn=1, call=call)
    )
    assert result.ok and orjson.loads(result.content) == {"posted": True, "tasks": 3, "done": 1}
    messages = [orjson.loads(m.raw) for m in await bus.history(run.stream_id)]
    [plan] = [m for m in messages if m["t"] == T.PLAN]
    assert plan["m"] == "Plan: 1 of 3 tasks done. notes found"
    details = PlanDetails.model_validate(plan["d"])
    assert details.node_id == "lead" and details.source == "update_plan"
    assert [(t.title, t.status) for t in details.tasks] == [
        ("Search the notes", "done"),
        ("Draft the answer", "in_progress"),
        ("Check the numbers", "pending"),
    ]

    bad = ToolCall(
        id="p2", name="update_plan", arguments={"tasks": [{"title": "x", "status": "?"}]}
    )
    refused = await env("lead.1.t1.p2").run(
        acts.tool_call, ToolCallInput(execution=ex, turn=1, call=bad)
    )
    assert not refused.ok and "tasks.0.status" in orjson.loads(refused.content)["error"]


async def test_the_offline_model_plans_when_offered_update_plan(
    bus: MessageBus, io_settings: Settings
) -> None:
    run = new_run()
    acts = AgentActivities(bus, None, OfflineProvider(), settings=io_settings)
    node = {"id": "lead", "type": "agent", "params": {"tools": ["update_plan", "calculator"]}}
    ex = execution(run, node, input="What is 6 * 7?")
    first = await env("lead.1.t1").run(
        acts.llm_turn, LlmTurnInput(execution=ex, turn=1, messages=[])
    )
    names = [c.name for c in first.message.tool_calls]
    assert names == ["update_plan", "calculator"]
