"""An interactive agent over A2A (issue 30): the ``chat`` graph answers each message and
waits (IDLE) for the next; A2A shows that wait as ``input-required`` with the answer
as the status message, so a blocking send returns at each answer, a message on the
same task continues the conversation, and ``metadata.complete`` or a cancel ends it
(docs/protocols/a2a.md#conversations-interactive-agents)."""

from __future__ import annotations

import contextlib

import httpx
import pytest
from a2a.client.client import Client
from a2a.helpers import get_data_parts, get_text_parts
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_a2a import a2a_client, rpc, send, send_blocking, user_message

pytestmark = pytest.mark.e2e

WAITING = TaskState.TASK_STATE_INPUT_REQUIRED


def status_text(task: Task) -> str:
    return "".join(get_text_parts(task.status.message.parts))


def follow_up(text: str, task: Task) -> object:
    message = user_message(text, task_id=task.id)
    message.context_id = task.context_id
    return message


async def run_messages(http: httpx.AsyncClient, workflow_id: str) -> list[dict[str, object]]:
    run_id = (await http.get(f"/runs/{workflow_id}")).json()["run_id"]
    reply = await http.get(f"/runs/{workflow_id}/{run_id}/updates")
    assert reply.status_code == 200, reply.text
    messages: list[dict[str, object]] = reply.json()["messages"]
    return messages


def answers(messages: list[dict[str, object]]) -> list[str]:
    """The agent's answers (ANSWER = 7) in the run's own message stream."""
    return [str(m["m"]) for m in messages if m["t"] == 7 and not m.get("w")]


async def test_a_blocking_send_to_chat_returns_each_answer_as_input_required(
    stack: SpindleStack,
    callers: dict[str, Caller],
    http: httpx.AsyncClient,
    examples: list[str],
    unique: str,
) -> None:
    client: Client
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        first = await send_blocking(client, user_message(f"what is 6 * 7 {unique}", graph="chat"))
        assert first.status.state == WAITING, first
        [data] = get_data_parts(first.status.message.parts)
        assert data == {"node_id": "assistant", "awaiting": "message"}
        # The agent's last answer before it waits is the status message (the offline
        # model also launches a workstream and answers again with its report).
        before = answers(await run_messages(http, first.id))
        answer = before[-1]
        assert status_text(first) == answer and "6 * 7" in answer

        read = await client.get_task(GetTaskRequest(id=first.id))
        assert read.status.state == WAITING and status_text(read) == answer
        assert (
            read.status.message
            == (await client.get_task(GetTaskRequest(id=first.id))).status.message
        )

        second = await send_blocking(client, follow_up("and 2 + 3", first))  # type: ignore[arg-type]
        assert (second.id, second.status.state) == (first.id, WAITING)
        said = answers(await run_messages(http, first.id))
        assert len(said) > len(before) and status_text(second) == said[-1]
        assert "and 2 + 3" in status_text(second)  # its answer to the second message
        questions = [m["m"] for m in await run_messages(http, first.id) if m["t"] == 8]
        assert questions[-1] == "and 2 + 3"  # the follow-up reached the agent as a user message

        done_message = follow_up("thanks", first)
        done_message.metadata.update({"complete": True})  # type: ignore[attr-defined]
        done = await send_blocking(client, done_message)  # type: ignore[arg-type]
    assert (done.id, done.status.state) == (first.id, TaskState.TASK_STATE_COMPLETED), done
    assert [a.name for a in done.artifacts] == ["result"]
    run = (await http.get(f"/runs/{first.id}")).json()
    assert run["status"] == "completed"


async def test_a_streamed_conversation_stops_at_each_answer_and_cancel_ends_it(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=True) as client:
        events = await send(client, user_message(f"what is 2 + 2 {unique}", graph="chat"))
        task_id = events[0].task.id
        last = events[-1].status_update.status
        assert last.state == WAITING and "".join(get_text_parts(last.message.parts))
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        again = await client.get_task(GetTaskRequest(id=task_id))
    assert again.status.state == TaskState.TASK_STATE_CANCELED


FLOOD = 40
"""Messages ``flood`` posts: more than the 32 the old lookback read."""


async def flood(stack: SpindleStack, workflow_id: str, unique: str) -> None:
    """Post ``FLOOD`` messages on another workstream of the run's stream, with the real
    bus, as a workstream does while the agent waits."""
    bus = MessageBus.from_settings(stack.settings)
    try:
        posted = await bus.post_many(
            workflow_id,
            [
                (
                    CompactMessage(t=AgentMessageType.UPDATE, m=f"step {k}", w="ws-flood"),
                    f"flood-{unique}-{k}",
                )
                for k in range(FLOOD)
            ],
        )
    finally:
        await bus.close()
    assert [p.duplicate or p.closed for p in posted] == [False] * FLOOD


async def first_event(client: Client, task_id: str) -> StreamResponse:
    """The first event of a subscription to the task (the task as it is now)."""
    events = client.subscribe(SubscribeToTaskRequest(id=task_id))
    async with contextlib.aclosing(events):  # type: ignore[type-var]
        async for event in events:
            return event
    raise AssertionError("the subscription sent nothing")


async def test_a_waiting_agent_stays_input_required_behind_other_workstreams_messages(
    stack: SpindleStack,
    callers: dict[str, Caller],
    http: httpx.AsyncClient,
    examples: list[str],
    unique: str,
) -> None:
    """More messages on another workstream after the agent's IDLE than any lookback
    (the old one read the last 32) leave the task input-required with the answer."""
    async with (
        a2a_client(stack, callers["alice"], streaming=False) as client,
        a2a_client(stack, callers["alice"], streaming=True) as streaming,
    ):
        first = await send_blocking(client, user_message(f"what is 6 * 7 {unique}", graph="chat"))
        assert first.status.state == WAITING, first
        before = await client.get_task(GetTaskRequest(id=first.id))
        answer = status_text(before)
        assert answer == answers(await run_messages(http, first.id))[-1]

        await flood(stack, first.id, unique)
        kept = await run_messages(http, first.id)
        assert [m.get("w") for m in kept[-FLOOD:]] == ["ws-flood"] * FLOOD

        run = (await http.get(f"/runs/{first.id}")).json()
        assert run["awaiting_message"] == ["assistant"]
        after = await client.get_task(GetTaskRequest(id=first.id))
        assert after.status.state == WAITING and status_text(after) == answer
        assert after.status.message == before.status.message  # the same message, same id
        legacy = await rpc(stack, callers["alice"], "tasks/get", {"id": first.id})
        assert legacy["result"]["status"]["state"] == "input-required", legacy
        assert legacy["result"]["status"]["message"]["parts"][0]["text"] == answer
        opened = await first_event(streaming, first.id)
        assert opened.task.status.state == WAITING and status_text(opened.task) == answer

        # The agent still takes the next message and answers it.
        second = await send_blocking(client, follow_up("and 2 + 3", first))  # type: ignore[arg-type]
        assert (second.id, second.status.state) == (first.id, WAITING)
        assert "and 2 + 3" in status_text(second)
        await client.cancel_task(CancelTaskRequest(id=first.id))
