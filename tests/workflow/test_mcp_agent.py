"""An agent node of a graph run uses an MCP server's tool (docs/graphs/node-types.md).

The whole run goes through Temporal (time-skipping) with the offline model, which
calls the offered ``echo__shout`` tool with the prompt; the stdio MCP server
(``tests/mcp_echo_server.py``, the official SDK) is allow-listed for this worker only.
"""

from __future__ import annotations

import shlex
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.contracts import TOOL_CALL
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner

pytestmark = pytest.mark.workflow

COMMAND = [sys.executable, str(Path(__file__).resolve().parents[1] / "mcp_echo_server.py")]


@pytest.fixture(scope="module")
async def mcp_runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[GraphRunner]:
    # The worker's settings, with this worker's allow-list: its MCP tool cache reads them.
    allowed = worker_settings.model_copy(update={"mcp_stdio_commands": [shlex.join(COMMAND)]})
    task_queue = f"wf-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        time_skipping_env.client,
        allowed,
        bus=run_bus,
        archive=run_archive,
        task_queue=task_queue,
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive)


async def test_an_agent_node_calls_an_mcp_tool_in_its_own_activity(
    mcp_runner: GraphRunner,
) -> None:
    spec = parse_graph(
        {
            "name": "mcp-agent",
            "entry": "agent",
            "nodes": [
                {
                    "id": "agent",
                    "type": "agent",
                    "params": {
                        "prompt": "{{ input.text }}",
                        "mcp_servers": [
                            {
                                "name": "echo",
                                "command": COMMAND[0],
                                "args": COMMAND[1:],
                                "tools": ["shout"],
                            }
                        ],
                    },
                }
            ],
        }
    )
    handle = await mcp_runner.start(spec, {"text": "quiet words"})
    result = await handle.result()
    assert "QUIET WORDS" in str(result.output)

    messages = await mcp_runner.messages(handle.id)
    updates = [m["m"] for m in messages if m["t"] == AgentMessageType.UPDATE]
    assert "Using tool echo__shout" in updates
    history = await handle.fetch_history()
    calls = [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == TOOL_CALL
    ]
    assert calls == ["agent.1.t1.call_1_echo__shout"]
