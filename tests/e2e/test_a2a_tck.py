"""A2A TCK failures of issue 30, one regression test each, as the TCK sends them
(raw JSON-RPC) or with the official a2a-sdk client: the ``clarify`` skill that
parks in input-required, the push config id ``default``, the spec's errors for
finished tasks, artifacts of every part kind, a Message reply, and seed 003
``tasks.*`` tasks read, cancelled and followed as A2A tasks by the same id.
(CARD-STRUCT-001, the card without ``A2A-Version``, is in test_a2a_conformance.)"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from a2a.helpers import get_text_parts
from a2a.types import TaskState

from tests.callback_receiver import callback_receiver
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_a2a import a2a_client, send, send_blocking, user_message
from tests.e2e.test_a2a_conformance import call, v1_message
from tests.e2e.test_task_execution import ROOT, counting, task_ids_by_name
from tests.polling import eventually

pytestmark = pytest.mark.e2e

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
QUESTION = "How many days are there in 3 weeks?"
FILE_BYTES = base64.b64encode(b"file content").decode()


def literal(value: Any) -> str:
    """A JMESPath literal of ``value`` (for an output node's ``select``)."""
    return "`" + json.dumps(value) + "`"


def output_graph(name: str, output: Any) -> dict[str, Any]:
    """A graph whose output is ``output`` whatever the input."""
    return {
        "name": name,
        "entry": "out",
        "nodes": [{"id": "out", "type": "output", "params": {"select": literal(output)}}],
        "edges": [],
    }


async def register(http: httpx.AsyncClient, spec: dict[str, Any]) -> None:
    reply = await http.put(f"/graphs/{spec['name']}", json=spec)
    assert reply.status_code in (200, 201), reply.text


async def test_the_clarify_skill_waits_for_input_and_a_follow_up_completes_it(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """TCK input-required requirements (CORE-MULTI-*, CORE-CANCEL-001, CORE-HIST-*):
    the shipped skill parks, and a message on the same taskId/contextId completes it."""
    assert "clarify" in examples
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        asked = await send_blocking(client, user_message(f"a trip {unique}", graph="clarify"))
        assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "what is it for" in "".join(get_text_parts(asked.status.message.parts))
        answer = user_message("a holiday", task_id=asked.id)
        answer.context_id = asked.context_id
        done = await send_blocking(client, answer)
    assert (done.id, done.context_id) == (asked.id, asked.context_id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    [result] = done.artifacts
    assert result.parts[0].data.struct_value["clarification"] == "a holiday"


async def test_a_push_config_set_without_id_is_named_default(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    asked = await call(
        stack,
        alice,
        "SendMessage",
        {"message": v1_message(f"x {unique}", unique, metadata={"graph": "clarify"})},
        v1=True,
    )
    task_id = asked["result"]["task"]["id"]
    async with callback_receiver(lambda n: 200) as receiver:
        created = await call(
            stack,
            alice,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "url": receiver.url},
            v1=True,
        )
        assert created["result"]["id"] == "default", created
        for params in ({"taskId": task_id}, {"taskId": task_id, "id": "default"}):
            got = await call(stack, alice, "GetTaskPushNotificationConfig", params, v1=True)
            assert got["result"]["id"] == "default", got
        legacy = await call(
            stack, alice, "tasks/pushNotificationConfig/get", {"id": task_id}, v1=False
        )
        assert legacy["result"]["pushNotificationConfig"]["id"] == "default", legacy


async def test_finished_tasks_answer_the_specs_errors(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """A2A 1.0 §3.1.5 (CORE-CANCEL-002) TaskNotCancelableError -32002 for cancel;
    §3.1.1 (CORE-SEND-002) and §3.1.6 UnsupportedOperationError -32004 for a
    message to, or a subscription of, a terminal task; 0.3 the same codes."""
    alice = callers["alice"]
    sent = await call(
        stack, alice, "SendMessage", {"message": v1_message(QUESTION, unique)}, v1=True
    )
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", sent
    cancel = await call(stack, alice, "CancelTask", {"id": task["id"]}, v1=True)
    assert cancel["error"]["code"] == -32002, cancel
    cancel_03 = await call(stack, alice, "tasks/cancel", {"id": task["id"]}, v1=False)
    assert cancel_03["error"]["code"] == -32002, cancel_03
    again = v1_message("more", f"{unique}-2", taskId=task["id"], contextId=task["contextId"])
    continued = await call(stack, alice, "SendMessage", {"message": again}, v1=True)
    assert continued["error"]["code"] == -32004, continued
    legacy = {
        "kind": "message",
        "role": "user",
        "messageId": f"m3-{unique}",
        "taskId": task["id"],
        "parts": [{"kind": "text", "text": "more"}],
    }
    continued_03 = await call(stack, alice, "message/send", {"message": legacy}, v1=False)
    assert continued_03["error"]["code"] == -32004, continued_03


ARTIFACTS = {
    "artifacts": [
        {"artifactId": "text", "parts": [{"text": "Generated text content"}]},
        {
            "artifactId": "file",
            "name": "the file",
            "parts": [{"raw": FILE_BYTES, "filename": "output.txt", "mediaType": "text/plain"}],
        },
        {
            "parts": [
                {
                    "url": "https://example.com/output.txt",
                    "filename": "output.txt",
                    "mediaType": "text/plain",
                }
            ]
        },
        {"artifactId": "data", "parts": [{"data": {"key": "value", "count": 42}}]},
        {
            "artifactId": "legacy",
            "parts": [{"kind": "file", "file": {"uri": "https://example.com/a", "name": "a"}}],
        },
    ]
}


async def test_artifacts_of_every_part_kind(
    stack: SpindleStack,
    callers: dict[str, Caller],
    http: httpx.AsyncClient,
    unique: str,
) -> None:
    """DM-ART-001 / DM-PART-001: text, file bytes, file URL and data artifacts,
    declared by the graph's output (docs/protocols/a2a.md)."""
    await register(http, output_graph(f"artifacts-{unique}", ARTIFACTS))
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        task = await send_blocking(client, user_message("go", graph=f"artifacts-{unique}"))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    kinds = [(a.artifact_id, a.parts[0].WhichOneof("content")) for a in task.artifacts]
    assert kinds == [
        ("text", "text"),
        ("file", "raw"),
        ("artifact-2", "url"),
        ("data", "data"),
        ("legacy", "url"),
    ]
    text, file, url, data, legacy = (a.parts[0] for a in task.artifacts)
    assert text.text == "Generated text content"
    assert (file.raw, file.filename, file.media_type) == (
        b"file content",
        "output.txt",
        "text/plain",
    )
    assert task.artifacts[1].name == "the file"
    assert (url.url, url.filename) == ("https://example.com/output.txt", "output.txt")
    assert dict(data.data.struct_value) == {"key": "value", "count": 42}
    assert (legacy.url, legacy.filename) == ("https://example.com/a", "a")

    # The same artifacts when streamed and over 0.3.
    async with a2a_client(stack, callers["alice"], streaming=True) as client:
        events = await send(client, user_message("go", graph=f"artifacts-{unique}"))
    streamed = [
        e.artifact_update.artifact.artifact_id for e in events if e.HasField("artifact_update")
    ]
    assert streamed == ["text", "file", "artifact-2", "data", "legacy"]
    old = {
        "kind": "message",
        "role": "user",
        "messageId": f"o-{unique}",
        "parts": [{"kind": "text", "text": "go"}],
        "metadata": {"graph": f"artifacts-{unique}"},
    }
    legacy_task = (await call(stack, callers["alice"], "message/send", {"message": old}, v1=False))[
        "result"
    ]
    parts = [a["parts"][0] for a in legacy_task["artifacts"]]
    assert [p["kind"] for p in parts] == ["text", "file", "file", "data", "file"]
    assert parts[1]["file"] == {"bytes": FILE_BYTES, "name": "output.txt", "mimeType": "text/plain"}


async def test_an_output_shaped_like_a_message_is_a_message_reply(
    stack: SpindleStack,
    callers: dict[str, Caller],
    http: httpx.AsyncClient,
    unique: str,
) -> None:
    """DM-MSG-001: a blocking send answers with a Message when the graph's output
    is a message; the task stays readable by the reply's taskId."""
    name = f"reply-{unique}"
    await register(http, output_graph(name, {"parts": [{"text": "Direct message response"}]}))
    async with a2a_client(stack, callers["alice"], streaming=False) as client:
        [event] = await send(client, user_message("hi", graph=name))
    assert event.HasField("message"), event
    reply = event.message
    assert [p.text for p in reply.parts] == ["Direct message response"]
    assert reply.role == 2 and reply.message_id and reply.task_id  # ROLE_AGENT
    got = await call(stack, callers["alice"], "GetTask", {"id": reply.task_id}, v1=True)
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["result"]["artifacts"][0]["parts"] == [{"text": "Direct message response"}]
    legacy = await call(
        stack,
        callers["alice"],
        "message/send",
        {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": f"l-{unique}",
                "parts": [{"kind": "text", "text": "hi"}],
                "metadata": {"graph": name},
            }
        },
        v1=False,
    )
    assert legacy["result"]["kind"] == "message", legacy
    assert legacy["result"]["parts"] == [{"kind": "text", "text": "Direct message response"}]


def asking_tree() -> list[dict[str, Any]]:
    return [
        ROOT,
        {
            "id": "ask",
            "name": "ask",
            "parent_id": "root",
            "schemas": {"method": "prompt"},
            "inputs": {"prompt": "Approve?"},
        },
        counting("then", "after approval", deps=["ask"]),
    ]


async def jsonrpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post(
        "/", json={"jsonrpc": "2.0", "id": "j", "method": method, "params": params}
    )
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def test_tasks_execute_answers_in_a2a_task_shape_and_a2a_reads_it(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient
) -> None:
    """Seed 003: a tasks.* task is an A2A task, and tasks.execute can answer as one."""
    started = await jsonrpc(
        http, "tasks.execute", {"tasks": asking_tree(), "response_format": "a2a"}
    )
    task = started["result"]
    root_id = task["id"]
    assert task["contextId"] == root_id
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), task
    assert task["metadata"]["protocol"] == "a2a" and task["metadata"]["workflowId"].startswith(
        "run-"
    )
    ids = await task_ids_by_name(http, root_id)

    got = await call(stack, callers["alice"], "GetTask", {"id": root_id}, v1=True)
    assert (
        got["result"]["id"] == root_id and got["result"]["status"]["state"] == "TASK_STATE_WORKING"
    )
    legacy = await call(stack, callers["alice"], "tasks/get", {"id": ids["ask"]}, v1=False)
    assert legacy["result"]["kind"] == "task" and legacy["result"]["id"] == ids["ask"]
    other = await call(stack, callers["mallory"], "GetTask", {"id": root_id}, v1=True)
    assert other["error"]["code"] == -32001, "another tenant's task is not found"

    as_03 = await jsonrpc(http, "tasks.execute", {"tasks": [ROOT], "response_format": "a2a-0.3"})
    assert as_03["result"]["kind"] == "task"
    bad = await jsonrpc(http, "tasks.execute", {"tasks": [ROOT], "response_format": "xml"})
    assert bad["error"]["code"] == -32602 and bad["error"]["data"]["field"] == "response_format"

    # Subscribe by the same id, then cancel over A2A: the subscription sees canceled.
    body = {"jsonrpc": "2.0", "id": "s", "method": "SubscribeToTask", "params": {"id": root_id}}
    headers = {**callers["alice"].headers, "A2A-Version": "1.0"}
    frames: list[dict[str, Any]] = []
    subscribed = asyncio.Event()

    async def follow() -> None:
        async with (
            httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as client,
            client.stream("POST", "/", json=body, headers=headers) as reply,
        ):
            async for line in reply.aiter_lines():
                if line.startswith("data:"):
                    frames.append(json.loads(line[5:])["result"])
                    subscribed.set()

    follower = asyncio.create_task(follow())
    async with asyncio.timeout(60):
        await subscribed.wait()

    async def asking() -> bool:
        ask = await jsonrpc(http, "tasks.get", {"task_id": ids["ask"]})
        return bool(ask["result"]["status"] == "in_progress")

    await eventually(asking, what="the prompt task waits", timeout=30, alive=stack.worker.alive)
    cancelled = await call(stack, callers["alice"], "CancelTask", {"id": root_id}, v1=True)
    assert cancelled["result"]["status"]["state"] == "TASK_STATE_CANCELED", cancelled
    async with asyncio.timeout(60):
        await follower
    assert frames[0]["task"]["id"] == root_id
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED", frames
    seed = await jsonrpc(http, "tasks.get", {"task_id": root_id})
    assert seed["result"]["status"] == "cancelled"
    again = await call(stack, callers["alice"], "CancelTask", {"id": root_id}, v1=True)
    assert again["error"]["code"] == -32002, again
    late = await call(stack, callers["alice"], "GetTask", {"id": ids["then"]}, v1=True)
    assert late["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_streaming_execute_refuses_the_a2a_format(http: httpx.AsyncClient) -> None:
    refused = await jsonrpc(
        http, "tasks.execute", {"tasks": [ROOT], "use_streaming": True, "response_format": "a2a"}
    )
    assert refused["error"]["code"] == -32602, refused
    assert "SubscribeToTask" in refused["error"]["data"]["reason"]


def test_a_part_is_read_in_either_version() -> None:
    """The part forms an output may use (unit-level, no stack)."""
    from spindle.gateway.protocols.a2a.a2a_output import declared_artifacts, reply_parts

    assert reply_parts({"parts": [{"text": "x"}], "extra": 1}) is None
    assert reply_parts({"parts": [{"text": "x"}], "role": "user"}) is None
    assert declared_artifacts({"artifacts": [{"parts": [{"bogus": 1}]}]}) is None
    [artifact] = (
        declared_artifacts({"artifacts": [{"parts": [{"kind": "data", "data": {"a": 1}}]}]}) or []
    )
    assert artifact.parts[0].data.struct_value["a"] == 1 and artifact.artifact_id == "artifact-0"


async def test_the_a2a_tck_graph_plays_the_tcks_scenarios_by_message_id(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """The shipped a2a-tck graph (SPINDLE_A2A_DEFAULT_GRAPH=a2a-tck for a stock TCK
    run) routes on meta.a2a.messageId as the TCK's own SUT agent does."""
    alice = callers["alice"]

    async def send_as(prefix: str, **extra: Any) -> dict[str, Any]:
        message = {
            "messageId": f"{prefix}-{unique}",
            "role": "ROLE_USER",
            "parts": [{"text": "TCK"}],
            "metadata": {"graph": "a2a-tck"},
            **extra,
        }
        answer = await call(stack, alice, "SendMessage", {"message": message}, v1=True)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    parked = (await send_as("tck-input-required"))["task"]
    assert parked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = (await send_as("tck-complete-task", taskId=parked["id"]))["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    complete = (await send_as("tck-complete-task"))["task"]
    assert complete["artifacts"][0]["parts"] == [{"text": "Hello from TCK"}]
    file = (await send_as("tck-artifact-file"))["task"]["artifacts"][0]["parts"][0]
    assert (file["filename"], file["mediaType"], base64.b64decode(file["raw"])) == (
        "output.txt",
        "text/plain",
        b"File content",
    )
    url = (await send_as("tck-artifact-file-url"))["task"]["artifacts"][0]["parts"][0]
    assert url["url"] == "https://example.com/output.txt"
    data = (await send_as("tck-artifact-data"))["task"]["artifacts"][0]["parts"][0]
    assert data["data"] == {"key": "value", "count": 42}
    text = (await send_as("tck-artifact-text"))["task"]["artifacts"][0]["parts"][0]
    assert text == {"text": "Generated text content"}
    reply = (await send_as("tck-message-response"))["message"]
    assert reply["parts"] == [{"text": "Direct message response"}]


async def test_a_send_without_a_message_or_parts_is_invalid_params(
    stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    """TCK CORE-ERR-002: ``SendMessage`` with ``{}`` params is refused before any run."""
    alice = callers["alice"]
    empty = await call(stack, alice, "SendMessage", {}, v1=True)
    assert empty["error"]["code"] == -32602, empty
    no_parts = {"messageId": f"e-{unique}", "role": "ROLE_USER", "parts": []}
    refused = await call(stack, alice, "SendMessage", {"message": no_parts}, v1=True)
    assert refused["error"]["code"] == -32602 and "message.parts" in refused["error"]["message"]
    streamed = await call(stack, alice, "SendStreamingMessage", {}, v1=True)
    assert streamed["error"]["code"] == -32602, streamed


def test_the_cards_default_version_is_a_setting() -> None:
    """SPINDLE_A2A_CARD_DEFAULT_VERSION=0.3 serves the 0.3 card to a request without
    A2A-Version at the spec's path (a deployment of 0.3 clients); a version always wins."""
    from spindle.gateway.protocols.a2a.agent_card import wants_v1

    path = "/.well-known/agent-card.json"
    assert wants_v1(None, path) and wants_v1("", path, "1.0")
    assert not wants_v1(None, path, "0.3") and wants_v1("1.0", path, "0.3")
    assert not wants_v1(None, "/.well-known/agent.json") and not wants_v1("0.3", path)
