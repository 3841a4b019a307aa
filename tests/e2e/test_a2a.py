"""Spindle as an A2A agent, driven by the official a2a-sdk client over real HTTP.

The v1.0 flows use ``a2a.client`` exactly as an A2A application would (card
resolution, then a JSON-RPC client chosen from the card); the 0.3 flows are raw
JSON-RPC calls with the 0.3 method names and payloads and no ``A2A-Version``
header, as an a2a-sdk 0.3 client sends them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import A2ACardResolver
from a2a.client.client import Client
from a2a.helpers import get_data_parts, get_text_parts, new_data_part, new_text_part
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from tests.e2e.conftest import Caller, SpindleStack
from tests.polling import eventually

pytestmark = pytest.mark.e2e

TIMEOUT = httpx.Timeout(60.0, connect=5.0)


@asynccontextmanager
async def a2a_client(
    stack: SpindleStack, caller: Caller, *, streaming: bool
) -> AsyncIterator[Client]:
    """An SDK client built from the gateway's agent card, acting as ``caller``."""
    async with httpx.AsyncClient(headers=caller.headers, timeout=TIMEOUT) as http:
        client = await create_client(
            stack.base_url, client_config=ClientConfig(streaming=streaming, httpx_client=http)
        )
        try:
            yield client
        finally:
            await client.close()


def user_message(text: str, *, graph: str | None = None, task_id: str | None = None) -> Message:
    message = Message(
        message_id=f"m-{abs(hash((text, graph, task_id)))}",
        role=Role.ROLE_USER,
        parts=[new_text_part(text)],
    )
    if task_id:
        message.task_id = task_id
    if graph:
        message.metadata.update({"graph": graph})
    return message


async def send(client: Client, message: Message) -> list[StreamResponse]:
    return [event async for event in client.send_message(SendMessageRequest(message=message))]


async def send_blocking(client: Client, message: Message) -> Task:
    events = await send(client, message)
    assert len(events) == 1 and events[0].HasField("task"), events
    return events[0].task


def result_data(task: Task) -> Any:
    """The run's output from the task's ``result`` artifact (data, or text)."""
    [artifact] = [a for a in task.artifacts if a.name == "result"]
    data = get_data_parts(artifact.parts)
    return data[0] if data else "".join(get_text_parts(artifact.parts))


async def test_agent_card_is_public_and_parsed_by_the_sdk(stack: SpindleStack) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as anonymous:
        card = await A2ACardResolver(anonymous, stack.base_url).get_agent_card()
        assert card.name == "Spindle"
        assert card.capabilities.streaming is True
        assert card.capabilities.push_notifications is True
        interfaces = {(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
        assert interfaces == {("JSONRPC", "1.0"), ("JSONRPC", "0.3")}
        assert all(i.url == f"{stack.base_url}/" for i in card.supported_interfaces)
        assert "run-graph" in {s.id for s in card.skills}
        for path in ("/.well-known/agent-card", "/.well-known/agent.json"):
            reply = await anonymous.get(f"{stack.base_url}{path}")
            assert reply.status_code == 200
            body = reply.json()
            assert body["name"] == "Spindle" and body["url"] == f"{stack.base_url}/"
            assert body["capabilities"]["streaming"] is True


async def test_the_card_lists_every_graph_the_callers_tenant_can_run(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    """Fetched with credentials, the card has a skill per registered graph of the
    caller's tenant (all of them, not a fixed few); anonymous, the generic skills only."""
    generic = {"run-graph", "tasks.execute"}
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        resolver = A2ACardResolver(client, stack.base_url)
        alice, mallory = callers["alice"], callers["mallory"]
        card = await resolver.get_agent_card(http_kwargs={"headers": alice.headers})
        registered = await client.get(f"{stack.base_url}/graphs", headers=alice.headers)
        names = {g["name"] for g in registered.json()["graphs"]}
        assert len(names) >= len(examples) > 4 and set(examples) <= names
        assert {s.id for s in card.skills} == generic | names
        skill = next(s for s in card.skills if s.id == "approval-flow")
        assert "'graph': 'approval-flow'" in skill.description
        other = await resolver.get_agent_card(http_kwargs={"headers": mallory.headers})
        theirs = await client.get(f"{stack.base_url}/graphs", headers=mallory.headers)
        assert {s.id for s in other.skills} == generic | {
            g["name"] for g in theirs.json()["graphs"]
        }
        anonymous = await resolver.get_agent_card()
        assert {s.id for s in anonymous.skills} == generic
        with_key = await client.get(
            f"{stack.base_url}/.well-known/agent-card.json", headers=alice.headers
        )
        assert with_key.headers["cache-control"].startswith("private")
        assert "authorization" in with_key.headers["vary"].lower()


async def test_blocking_send_completes_with_a_result_artifact_and_get_reads_it(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        task = await send_blocking(client, user_message("What is 6 times 7?"))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
        assert task.id.startswith("run-") and task.context_id == task.id
        assert result_data(task), "the run's output is the result artifact"
        metadata = MessageToDict(task.metadata)
        assert metadata["protocol"] == "a2a" and metadata["graph"] == "research-agent"

        fetched = await client.get_task(GetTaskRequest(id=task.id))
        assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
        assert result_data(fetched) == result_data(task)
        assert MessageToDict(fetched.metadata)["userId"] == "alice"

    rest = await stack_get(stack, callers["alice"], f"/runs/{task.id}")
    assert rest["graph_name"] == "research-agent"
    assert rest["input"] == {"question": "What is 6 times 7?"}
    assert rest["status"] == "completed"


async def test_streaming_send_reports_progress_then_completes(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=True) as client:
        events = await send(client, user_message("Summarize the notes on Temporal"))
    assert events[0].HasField("task"), "the stream starts with the task"
    task_id = events[0].task.id
    updates = [e.status_update for e in events if e.HasField("status_update")]
    states = [u.status.state for u in updates]
    assert TaskState.TASK_STATE_WORKING in states, "progress arrives as working updates"
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    assert all(u.task_id == task_id for u in updates)
    artifacts = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [a.artifact.name for a in artifacts] == ["result"]
    assert events[-1].HasField("status_update"), "the final status ends the stream"


async def test_input_required_then_follow_up_resumes_the_same_run(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        asked = await send_blocking(client, user_message("Q3 budget", graph="approval-flow"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, asked
        prompt = asked.status.message
        assert "Approve or reject" in " ".join(get_text_parts(prompt.parts))
        assert get_data_parts(prompt.parts)[0]["node_id"] == "review"

        got = await client.get_task(GetTaskRequest(id=asked.id))
        assert got.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        done = await send_blocking(client, user_message("approve", task_id=asked.id))
    assert done.id == asked.id, "the answer resumes the same task"
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done
    assert result_data(done)["decision"] == "approve"


async def test_streamed_answer_to_a_waiting_task(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=True) as client:
        first = await send(client, user_message("hiring plan", graph="approval-flow"))
        assert first[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        task_id = first[0].task.id
        second = await send(client, user_message("reject", task_id=task_id))
    assert second[0].task.id == task_id
    assert second[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


async def test_cancel_a_waiting_task(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        asked = await send_blocking(client, user_message("offsite", graph="approval-flow"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=asked.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        again = await client.get_task(GetTaskRequest(id=asked.id))
        assert again.status.state == TaskState.TASK_STATE_CANCELED


async def test_subscribe_follows_a_task_through_its_question_to_the_end(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with (
        a2a_client(stack, callers["alice"], streaming=False) as client,
        a2a_client(stack, callers["alice"], streaming=True) as streaming,
    ):
        request = SendMessageRequest(message=user_message("roadmap", graph="approval-flow"))
        request.configuration.return_immediately = True
        [started] = [event async for event in client.send_message(request)]
        task_id = started.task.id
        assert started.task.status.state == TaskState.TASK_STATE_WORKING

        # Whether the run is still drafting or already asks, the subscription
        # starts with the task, shows the question, and goes on (A2A §3.1.6:
        # it ends at a terminal state only) until the answered run completes.
        def state_of(event: StreamResponse) -> TaskState:
            if event.HasField("task"):
                return event.task.status.state
            if event.HasField("status_update"):
                return event.status_update.status.state
            return TaskState.TASK_STATE_WORKING

        events: list[StreamResponse] = []
        answered = False
        async for event in streaming.subscribe(SubscribeToTaskRequest(id=task_id)):
            events.append(event)
            if state_of(event) == TaskState.TASK_STATE_INPUT_REQUIRED and not answered:
                answered = True
                await send_blocking(client, user_message("approve", task_id=task_id))
        assert events[0].HasField("task") and events[0].task.id == task_id
        assert answered, "the subscription showed the question"
        assert state_of(events[-1]) == TaskState.TASK_STATE_COMPLETED
        assert any(e.HasField("artifact_update") for e in events)

        with pytest.raises(UnsupportedOperationError):
            [e async for e in streaming.subscribe(SubscribeToTaskRequest(id=task_id))]


async def test_protocol_0_3_stream_frames(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": "s1",
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "legacy-stream",
                "parts": [{"kind": "text", "text": "What is 5 plus 5?"}],
            }
        },
    }
    frames: list[dict[str, Any]] = []
    async with (
        httpx.AsyncClient(
            base_url=stack.base_url, headers=callers["alice"].headers, timeout=TIMEOUT
        ) as http,
        http.stream("POST", "/", json=body) as reply,
    ):
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        async for line in reply.aiter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    assert all(f["id"] == "s1" and "result" in f for f in frames), frames
    kinds = [f["result"]["kind"] for f in frames]
    assert kinds[0] == "task" and "artifact-update" in kinds
    final = frames[-1]["result"]
    assert final["kind"] == "status-update" and final["final"] is True
    assert final["status"]["state"] == "completed"


async def test_another_tenant_gets_task_not_found(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        task = await send_blocking(client, user_message("What is 2 plus 2?"))
    async with a2a_client(stack, callers["mallory"], streaming=False) as other:
        with pytest.raises(TaskNotFoundError):
            await other.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await other.cancel_task(CancelTaskRequest(id=task.id))
        assert task.id not in {t.id for t in (await other.list_tasks(ListTasksRequest())).tasks}
    reply = await rpc(stack, callers["mallory"], "tasks/get", {"id": task.id})
    assert reply["error"]["code"] == -32001, "A2A's task-not-found, in 0.3 too"
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        listed = await client.list_tasks(ListTasksRequest(context_id=task.id))
        assert [t.id for t in listed.tasks] == [task.id]
        page = await client.list_tasks(ListTasksRequest(page_size=1))
        assert len(page.tasks) == 1 and page.total_size >= 1


async def test_protocol_0_3_send_and_get(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "legacy-1",
        "parts": [{"kind": "text", "text": "What is 3 plus 4?"}],
    }
    sent = await rpc(stack, callers["alice"], "message/send", {"message": message})
    task = sent["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed", sent
    assert task["contextId"] == task["id"]
    assert task["metadata"]["protocol"] == "a2a"
    [artifact] = task["artifacts"]
    assert artifact["name"] == "result" and artifact["parts"][0]["kind"] in ("data", "text")

    got = await rpc(stack, callers["alice"], "tasks/get", {"id": task["id"]})
    assert got["result"]["status"]["state"] == "completed"
    assert got["id"] == "rpc-1"


async def test_protocol_errors_use_a2a_codes(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    unknown = await rpc(stack, callers["alice"], "tasks/get", {"id": "run-nope"})
    assert unknown["error"]["code"] == -32001
    bad_graph = {
        "kind": "message",
        "role": "user",
        "messageId": "legacy-2",
        "parts": [{"kind": "text", "text": "x"}],
        "metadata": {"graph": "no-such-graph"},
    }
    refused = await rpc(stack, callers["alice"], "message/send", {"message": bad_graph})
    assert refused["error"]["code"] == -32602
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as anonymous:
        reply = await anonymous.post(
            "/", json={"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": "x"}}
        )
    assert reply.status_code == 401
    assert reply.json()["id"] == 7 and reply.json()["error"]["data"]["reason"] == "UNAUTHENTICATED"


async def test_data_part_is_the_run_input(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    message = Message(
        message_id="data-input",
        role=Role.ROLE_USER,
        parts=[new_data_part({"topic": "launch plan", "audience": "board"})],
    )
    message.metadata.update({"graph": "approval-flow"})
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        asked = await send_blocking(client, message)
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        answer = Message(
            message_id="data-answer",
            role=Role.ROLE_USER,
            task_id=asked.id,
            parts=[new_data_part({"decision": "reject", "comment": "too early"})],
        )
        done = await send_blocking(client, answer)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert result_data(done)["comment"] == "too early"
    rest = await stack_get(stack, callers["alice"], f"/runs/{asked.id}")
    assert rest["input"] == {"topic": "launch plan", "audience": "board"}


async def test_a_failing_run_is_a_failed_task_with_its_error(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    graph = {
        "name": f"a2a-calc-{unique}",
        "entry": "calc",
        "input_schema": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
        "nodes": [
            {
                "id": "calc",
                "type": "tool",
                "params": {"tool": "calculator", "args": {"expression": "{{ input.expression }}"}},
            }
        ],
        "edges": [],
    }
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=callers["alice"].headers, timeout=TIMEOUT
    ) as http:
        registered = await http.put(f"/graphs/{graph['name']}", json=graph)
    assert registered.status_code in (200, 201), registered.text
    async with a2a_client(stack, callers["alice"], streaming=True) as client:
        events = await send(client, user_message("1 / 0", graph=str(graph["name"])))
    final = events[-1].status_update.status
    assert final.state == TaskState.TASK_STATE_FAILED
    assert "division by zero" in " ".join(get_text_parts(final.message.parts))


async def test_push_config_of_an_unknown_task_and_notifications_get_no_reply(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    config = {"taskId": "run-x", "pushNotificationConfig": {"url": "http://127.0.0.1:9/cb"}}
    refused = await rpc(stack, callers["alice"], "tasks/pushNotificationConfig/set", config)
    assert refused["error"]["code"] == -32001, "A2A: task not found"
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=callers["alice"].headers, timeout=TIMEOUT
    ) as http:
        silent = await http.post(
            "/", json={"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "run-x"}}
        )
        assert silent.status_code == 204 and silent.content == b""
        # A notification that sends a message still starts the run (without waiting on it).
        started = await http.post(
            "/",
            json={
                "jsonrpc": "2.0",
                "method": "message/stream",
                "params": {
                    "message": {
                        "kind": "message",
                        "role": "user",
                        "messageId": f"notify-{unique}",
                        "parts": [{"kind": "text", "text": f"notified {unique}"}],
                    }
                },
            },
        )
        assert started.status_code == 204 and started.content == b""

        async def run_of_topic() -> bool:
            runs = (await http.get("/runs", params={"graph": "research-agent"})).json()["runs"]
            return any(r["input"] == {"question": f"notified {unique}"} for r in runs)

        started_run: bool = await eventually(run_of_topic, what="the notified run", timeout=10)
        assert started_run


async def test_a2a_calls_in_a_batch(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "a", "method": "tasks/get", "params": {"id": "run-missing"}},
        {
            "jsonrpc": "2.0",
            "id": "b",
            "method": "message/stream",
            "params": {
                "message": {"kind": "message", "role": "user", "messageId": "s", "parts": []}
            },
        },
    ]
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=callers["alice"].headers, timeout=TIMEOUT
    ) as http:
        reply = await http.post("/", json=batch)
    assert reply.status_code == 200
    by_id = {r["id"]: r for r in reply.json()}
    assert by_id["a"]["error"]["code"] == -32001
    assert by_id["b"]["error"]["code"] == -32600, "no streaming inside a batch"


async def rpc(stack: SpindleStack, caller: Caller, method: str, params: dict[str, Any]) -> Any:
    """A raw 0.3-style JSON-RPC call (no A2A-Version header)."""
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=caller.headers, timeout=TIMEOUT
    ) as http:
        reply = await http.post(
            "/", json={"jsonrpc": "2.0", "id": "rpc-1", "method": method, "params": params}
        )
    assert reply.status_code == 200, reply.text
    return reply.json()


async def stack_get(stack: SpindleStack, caller: Caller, path: str) -> Any:
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=caller.headers, timeout=TIMEOUT
    ) as http:
        reply = await http.get(path)
    assert reply.status_code == 200, reply.text
    return reply.json()
