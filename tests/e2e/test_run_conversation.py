"""See what the model is given, over HTTP (docs/conversations.md, Memory):
``GET /runs/{id}/conversation`` (paged, another tenant's run refused as an unknown
one) and ``GET /conversations/{id}`` (a thread's runs and shared memory)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from spindle.client import AsyncSpindleClient, ClientConfig
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.run_driver import start, wait_for_status
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def agent_graph(name: str, prompt: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "chat",
        "nodes": [
            {
                "id": "chat",
                "type": "agent",
                "params": {
                    "instructions": "You remember.",
                    "prompt": prompt,
                    "tools": ["calculator"],
                    "context": {"max_tokens": 4000, "strategy": "window"},
                },
            }
        ],
        "edges": [],
    }


async def test_the_conversation_an_agent_is_given_paged_and_only_to_its_tenant(
    http: httpx.AsyncClient, clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    run = await start(http, graph_spec=agent_graph(f"mem-{unique}", "what is 6 * 7?"))
    workflow_id = run["workflow_id"]
    await wait_for_status(http, workflow_id, {"completed"})

    reply = await http.get(f"/runs/{workflow_id}/conversation")
    assert reply.status_code == 200, reply.text
    view = reply.json()
    assert view["node"] == "chat" and view["workstream"] == "main"
    roles = [m["role"] for m in view["messages"]]
    # system, the prompt, the tool call, its result, the answer.
    assert roles == ["system", "user", "assistant", "tool", "assistant"], roles
    assert view["messages"][0]["content"] == "You remember."
    assert view["messages"][1]["content"] == "what is 6 * 7?"
    assert view["messages"][2]["tool_calls"][0]["name"] == "calculator"
    assert view["messages"][3]["tool_call_id"] == view["messages"][2]["tool_calls"][0]["id"]
    assert "42" in view["messages"][4]["content"]
    assert [m["seq"] for m in view["messages"]] == [-1, 0, 1, 2, 3]
    assert view["dropped"] == 0 and view["summary"] is None and view["tokens"] > 0

    first = (await http.get(f"/runs/{workflow_id}/conversation?node=chat&limit=2")).json()
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["next_cursor"] == "2"
    rest = (await http.get(f"/runs/{workflow_id}/conversation?cursor=2&limit=10")).json()
    assert [m["seq"] for m in rest["messages"]] == [1, 2, 3] and rest["next_cursor"] is None

    missing = await http.get(f"/runs/{workflow_id}/conversation?node=nobody")
    assert missing.status_code == 404 and "nobody" in missing.json()["detail"]
    theirs = await clients["mallory"].get(f"/runs/{workflow_id}/conversation")
    assert theirs.status_code == 404
    assert (await clients["anonymous"].get(f"/runs/{workflow_id}/conversation")).status_code == 401


async def test_a_thread_shares_its_agents_memory_across_runs(
    http: httpx.AsyncClient,
    clients: dict[str, httpx.AsyncClient],
    unique: str,
    stack: SpindleStack,
    callers: dict[str, Caller],
) -> None:
    conversation = f"thread-{unique}"
    first = await start(
        http,
        graph_spec=agent_graph(f"thread-{unique}", "my name is Ada"),
        conversation_id=conversation,
    )
    await wait_for_status(http, first["workflow_id"], {"completed"})
    # The run reads "completed" a moment before its conversation hears it has ended:
    # enqueue, so the second run starts once the first has (not refused while it ends).
    second = await start(
        http,
        graph_spec=agent_graph(f"thread-{unique}", "what is my name?"),
        conversation_id=conversation,
        if_busy="enqueue",
    )
    await wait_for_status(http, second["workflow_id"], {"completed"})

    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    async with AsyncSpindleClient(config) as sdk:
        view = await sdk.get_conversation(second["workflow_id"], node="chat")
        assert view.memory == "thread"
        said = [m.content for m in view.messages if m.role == "user"]
        assert said == ["my name is Ada", "what is my name?"]
        assert (await sdk.get_thread(conversation)).conversation_id == conversation

    async def listed() -> dict[str, Any] | None:
        reply = await http.get(f"/conversations/{conversation}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        done = [r for r in body["runs"] if r["state"] == "completed"]
        return body if len(done) == 2 else None

    thread = await eventually(listed, what="both runs listed as completed", timeout=20)
    assert [r["workflow_id"] for r in thread["runs"]] == [
        first["workflow_id"],
        second["workflow_id"],
    ]
    [memory] = thread["memory"]
    assert memory["node"] == "chat" and memory["messages"] == 4

    other = await clients["mallory"].get(f"/conversations/{conversation}")
    assert other.status_code == 404


async def test_a_workstreams_agent_conversation_under_its_launch_context(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    parent = await start(http, graph="approval-flow", input={"topic": f"memory {unique}"})
    workflow_id = parent["workflow_id"]
    await wait_for_status(http, workflow_id, {"paused"})
    launched = await http.post(
        f"/runs/{workflow_id}/workstreams",
        json={
            "task": "Summarise the Q3 budget draft in one line.",
            "agent": {"system": "Be short.", "context": {"max_tokens": 1000}},
        },
    )
    assert launched.status_code == 202, launched.text
    launch_id = launched.json()["launch_id"]

    async def answered() -> dict[str, Any] | None:
        reply = await http.get(
            f"/runs/{workflow_id}/conversation", params={"workstream": launch_id}
        )
        if reply.status_code == 404:
            return None
        body: dict[str, Any] = reply.json()
        roles = [m["role"] for m in body["messages"]]
        return body if roles[-1:] == ["assistant"] else None

    view = await eventually(answered, what="the workstream's answer", timeout=30)
    assert view["node"] == launch_id and view["workstream"] == launch_id
    assert view["messages"][0] == {**view["messages"][0], "role": "system", "content": "Be short."}
    assert view["messages"][1]["content"] == "Summarise the Q3 budget draft in one line."
    # The main workstream has no agent of its own here (approval-flow waits on a prompt).
    main = await http.get(f"/runs/{workflow_id}/conversation")
    assert main.status_code == 404
    await http.post(f"/runs/{workflow_id}/cancel")
