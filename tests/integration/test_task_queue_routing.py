"""Node types routed to a task queue of their own, on the real dev server.

A graph maps ``agent`` to a secondary queue and gives the agent node a priority;
a main worker (workflows and activities) and an activity-only worker on the
secondary queue (``build_workers`` as ``spindle worker --task-queue`` builds them)
run it. Temporal's history says where each activity was scheduled, with what
priority, and which worker ran it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.examples import load_example
from spindle.worker.main import build_workers
from tests.temporal_history import executed_activities

pytestmark = pytest.mark.integration

SUFFIX = uuid.uuid4().hex[:8]
MAIN_QUEUE = f"routing-main-{SUFFIX}"
LLM_QUEUE = f"routing-llm-{SUFFIX}"


@pytest.fixture(scope="module")
async def workers(temporal_client: Client, settings: Settings) -> AsyncIterator[None]:
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    main = settings.model_copy(update={"task_queue": MAIN_QUEUE})
    llm = main.model_copy(update={"worker_task_queues": [LLM_QUEUE]})
    async with AsyncExitStack() as stack:
        for queue_settings, identity in ((main, "main-worker"), (llm, "llm-worker")):
            for worker in build_workers(
                temporal_client, queue_settings, bus=bus, archive=archive, identity=identity
            ):
                await stack.enter_async_context(worker)
        yield
    await bus.close()
    await archive.close()


def routed_research_graph() -> dict[str, Any]:
    spec = load_example("research-agent").model_dump(by_alias=True, exclude_none=True)
    spec["name"] = f"routed-{SUFFIX}"
    spec["task_queues"] = {"agent": LLM_QUEUE}
    spec["nodes"][0]["priority"] = 1
    return spec


async def test_agent_nodes_run_on_their_queue_with_their_priority(
    workers: None, temporal_client: Client
) -> None:
    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=parse_graph(routed_research_graph()), input={"question": "What is 45 * 12?"}
        ),
        id=f"routed-{uuid.uuid4().hex[:10]}",
        task_queue=MAIN_QUEUE,
        result_type=GraphRunResult,
    )
    result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)
    assert result.status == RunStatus.COMPLETED
    assert "540" in result.output

    scheduled: dict[int, tuple[str, str, str, int]] = {}
    ran_by: dict[str, str] = {}
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            scheduled[event.event_id] = (
                attrs.activity_id,
                attrs.activity_type.name,
                attrs.task_queue.name,
                attrs.priority.priority_key,
            )
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            attrs_started = event.activity_task_started_event_attributes
            ran_by[scheduled[attrs_started.scheduled_event_id][0]] = attrs_started.identity

    agent = [s for s in scheduled.values() if s[0].startswith("researcher.")]
    others = [s for s in scheduled.values() if not s[0].startswith("researcher.")]
    # LLM turns and the agent's tool calls: on the LLM queue, priority 1, run by the LLM worker.
    assert {kind for _, kind, _, _ in agent} == {"llm_turn", "tool_call"}
    assert {(queue, priority) for _, _, queue, priority in agent} == {(LLM_QUEUE, 1)}
    assert {ran_by[activity_id] for activity_id, *_ in agent} == {"llm-worker"}
    # Nothing else goes through a task queue: the output node (its type's default)
    # and the run's finish are local activities on the run's own worker.
    assert others == []
    local = {e.activity_id for e in executed_activities(await handle.fetch_history()) if e.local}
    assert {"answer.1", "finish"} <= local
