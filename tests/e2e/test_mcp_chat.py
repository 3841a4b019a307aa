"""An interactive agent over MCP (issue 30): the ``chat`` graph answers and waits (IDLE)
for the next user message. A tool call asks the client for that message by a form
elicitation whose message is the agent's answer; a reply goes to the agent, a decline
completes it and the call returns the run's output. As an MCP task, the wait is
``input_required`` with the answer as ``statusMessage``
(docs/protocols/mcp.md#conversations-interactive-agents)."""

from __future__ import annotations

from typing import Any

import httpx
import mcp_types as types
import pytest

from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_a2a_chat import flood
from tests.e2e.test_mcp import mcp_client, run_of
from tests.e2e.test_mcp_tasks import raw_mcp, start_task

pytestmark = pytest.mark.e2e


async def test_a_tool_call_to_chat_asks_for_each_next_message_and_a_decline_ends_it(
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    http: httpx.AsyncClient,
    unique: str,
) -> None:
    asked: list[types.ElicitRequestParams] = []
    replies = [types.ElicitResult(action="accept", content={"message": "and 2 + 3"})]

    async def reply(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return replies.pop(0) if replies else types.ElicitResult(action="decline")

    async with mcp_client(stack, callers["alice"], elicitation_callback=reply, mode="legacy") as c:
        result = await c.call_tool("chat", {"message": f"what is 6 * 7 {unique}"})
    assert not result.is_error, result
    first, second = asked
    assert isinstance(first, types.ElicitRequestFormParams)
    assert f"what is 6 * 7 {unique}" in first.message and "decline to finish" in first.message
    assert first.requested_schema["required"] == ["message"]
    assert "and 2 + 3" in second.message  # the agent's answer to the reply
    run = (await http.get(f"/runs/{run_of(result)}")).json()
    assert run["status"] == "completed"  # the decline completed the agent, and the run


async def test_a_chat_task_waiting_for_the_user_is_input_required_with_the_answer(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    async with raw_mcp(stack, callers["alice"]) as session:
        task_id = await start_task(session, "chat", {"message": f"what is 6 * 7 {unique}"})
        status: dict[str, Any] = {}
        for _ in range(1000):  # poll tasks/get as a client does
            status = await session.request("tasks/get", {"taskId": task_id})
            if status["status"] != "working":
                break
        assert status["status"] == "input_required", status
        assert f"what is 6 * 7 {unique}" in status["statusMessage"]
        await flood(stack, task_id, unique)  # another workstream talks while it waits
        again = await session.request("tasks/get", {"taskId": task_id})
        assert (again["status"], again["statusMessage"]) == (
            "input_required",
            status["statusMessage"],
        )
        cancelled = await session.request("tasks/cancel", {"taskId": task_id})
        assert cancelled["status"] == "cancelled"
