"""A2A conformance defects found by the A2A TCK (a2aproject/a2a-tck), one
regression test each, over raw JSON-RPC as the TCK sends it: task history and
``historyLength``, -32005 for an unsupported media type, -32602 for bad 0.3
params, a ``result`` on 0.3 push-config delete, a cacheable agent card,
camelCase task metadata, and HTTP 415 for a body that is not JSON."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict, ParseError

from tests.callback_receiver import callback_receiver
from tests.e2e.conftest import Caller, SpindleStack

pytestmark = pytest.mark.e2e

TIMEOUT = httpx.Timeout(60.0, connect=5.0)
QUESTION = "How many days are there in 3 weeks?"


async def call(
    stack: SpindleStack, caller: Caller, method: str, params: dict[str, Any], *, v1: bool
) -> dict[str, Any]:
    """One JSON-RPC call: the 1.0 method names with ``A2A-Version: 1.0``, else 0.3."""
    headers = {**caller.headers, **({"A2A-Version": "1.0"} if v1 else {})}
    async with httpx.AsyncClient(base_url=stack.base_url, headers=headers, timeout=TIMEOUT) as http:
        reply = await http.post(
            "/", json={"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params}
        )
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def v1_message(text: str, unique: str, **extra: Any) -> dict[str, Any]:
    return {"messageId": f"m-{unique}", "role": "ROLE_USER", "parts": [{"text": text}], **extra}


async def test_get_task_returns_the_history_and_honours_history_length(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    sent = await call(
        stack, alice, "SendMessage", {"message": v1_message(QUESTION, unique)}, v1=True
    )
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", sent

    got = (await call(stack, alice, "GetTask", {"id": task["id"]}, v1=True))["result"]
    history = got["history"]
    assert history[0]["role"] == "ROLE_USER" and history[0]["parts"][0]["text"] == QUESTION
    assert any(m["role"] == "ROLE_AGENT" for m in history[1:]), history
    assert len({m["messageId"] for m in history}) == len(history)

    last = await call(stack, alice, "GetTask", {"id": task["id"], "historyLength": 1}, v1=True)
    assert last["result"]["history"] == history[-1:]
    none = await call(stack, alice, "GetTask", {"id": task["id"], "historyLength": 0}, v1=True)
    assert "history" not in none["result"]

    negative = await call(stack, alice, "GetTask", {"id": task["id"], "historyLength": -1}, v1=True)
    assert negative["error"]["code"] == -32602, negative
    legacy = await call(stack, alice, "tasks/get", {"id": task["id"], "historyLength": 2}, v1=False)
    assert [m["role"] for m in legacy["result"]["history"]] == [
        "user" if m["role"] == "ROLE_USER" else "agent" for m in history[-2:]
    ]


async def test_the_users_answer_is_in_the_history(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    asked = await call(
        stack,
        alice,
        "SendMessage",
        {"message": v1_message(f"topic {unique}", unique, metadata={"graph": "approval-flow"})},
        v1=True,
    )
    task_id = asked["result"]["task"]["id"]
    assert asked["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
    answer = v1_message("approve", f"{unique}-answer", taskId=task_id)
    done = await call(
        stack,
        alice,
        "SendMessage",
        {"message": answer, "configuration": {"historyLength": 0}},
        v1=True,
    )
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert "history" not in done["result"]["task"], "historyLength 0 on a send omits it"

    history = (await call(stack, alice, "GetTask", {"id": task_id}, v1=True))["result"]["history"]
    users = [m["parts"][0]["text"] for m in history if m["role"] == "ROLE_USER"]
    assert users == [f"topic {unique}", "approve"], history


async def test_an_unsupported_media_type_is_content_type_not_supported(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    raw = {
        "messageId": f"raw-{unique}",
        "role": "ROLE_USER",
        "parts": [{"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}],
    }
    refused = await call(stack, alice, "SendMessage", {"message": raw}, v1=True)
    assert refused["error"]["code"] == -32005, refused
    assert "application/x-unsupported-tck-type" in refused["error"]["message"]

    legacy = {
        "kind": "message",
        "role": "user",
        "messageId": f"file-{unique}",
        "parts": [{"kind": "file", "file": {"bytes": "dGNr", "mimeType": "image/x-tck"}}],
    }
    refused_03 = await call(stack, alice, "message/send", {"message": legacy}, v1=False)
    assert refused_03["error"]["code"] == -32005, refused_03


async def test_protocol_0_3_bad_params_are_invalid_params_naming_the_field(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    no_parts = {"kind": "message", "role": "user", "messageId": "bad-1"}
    answer = await call(stack, callers["alice"], "message/send", {"message": no_parts}, v1=False)
    error = answer["error"]
    assert error["code"] == -32602, answer
    assert "params.message.parts" in {e["field"] for e in error["data"]["errors"]}
    assert "pydantic" not in str(answer), "no raw validation dump"

    missing_id = await call(stack, callers["alice"], "tasks/get", {}, v1=False)
    assert missing_id["error"]["code"] == -32602
    assert [e["field"] for e in missing_id["error"]["data"]["errors"]] == ["params.id"]

    # 0.3 requires a kind on every part (the SDK took a part without one as text).
    no_kind = {
        "kind": "message",
        "role": "user",
        "messageId": "bad-2",
        "parts": [{"kind": "text", "text": "fine"}, {"type": "unsupported_type", "text": "x"}],
    }
    kindless = await call(stack, callers["alice"], "message/send", {"message": no_kind}, v1=False)
    assert kindless["error"]["code"] == -32602, kindless
    fields = [e["field"] for e in kindless["error"]["data"]["errors"]]
    assert fields == ["params.message.parts[1].kind"]


async def test_protocol_0_3_push_config_delete_answers_with_a_null_result(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    legacy = {
        "kind": "message",
        "role": "user",
        "messageId": f"del-{unique}",
        "parts": [{"kind": "text", "text": QUESTION}],
    }
    task = (await call(stack, alice, "message/send", {"message": legacy}, v1=False))["result"]
    async with callback_receiver(lambda n: 200) as receiver:
        config = {"id": "gone", "url": receiver.url}
        params = {"taskId": task["id"], "pushNotificationConfig": config}
        stored = await call(stack, alice, "tasks/pushNotificationConfig/set", params, v1=False)
        assert "result" in stored, stored
        deleted = await call(
            stack,
            alice,
            "tasks/pushNotificationConfig/delete",
            {"id": task["id"], "pushNotificationConfigId": "gone"},
            v1=False,
        )
    assert deleted == {"jsonrpc": "2.0", "id": "c-1", "result": None}
    listed = await call(
        stack, alice, "tasks/pushNotificationConfig/list", {"id": task["id"]}, v1=False
    )
    assert listed["result"] == []


async def test_agent_card_is_cacheable_and_revalidates_with_304(stack: SpindleStack) -> None:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as http:
        for path in ("/.well-known/agent-card.json", "/.well-known/agent-card"):
            first = await http.get(path)
            assert first.status_code == 200
            assert "max-age=" in first.headers["cache-control"]
            assert first.headers["last-modified"].endswith(" GMT")
            etag = first.headers["etag"]
            assert etag.startswith('"') and etag.endswith('"')
            again = await http.get(path, headers={"If-None-Match": etag})
            assert again.status_code == 304 and again.content == b""
            assert again.headers["etag"] == etag
            changed = await http.get(path, headers={"If-None-Match": '"something-else"'})
            assert changed.status_code == 200 and changed.json() == first.json()


async def test_a_1_0_client_gets_the_pure_1_0_card_and_a_0_3_client_the_0_3_fields(
    stack: SpindleStack,
) -> None:
    """A2A 1.0 §3.6 and §14.3: the card follows ``A2A-Version``; without one,
    ``/.well-known/agent-card.json`` is the 1.0 card (TCK CARD-STRUCT-001 fetches it
    without the header and refuses 0.3 members), the two older paths the 0.3 one."""
    path = "/.well-known/agent-card.json"
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as http:
        v1 = await http.get(path, headers={"A2A-Version": "1.0"})
        by_query = await http.get(f"{path}?A2A-Version=1.0")
        plain = await http.get(path)
        v03 = await http.get(path, headers={"A2A-Version": "0.3"})
        v03_query = await http.get(f"{path}?A2A-Version=0.3")
        older = [await http.get(p) for p in ("/.well-known/agent-card", "/.well-known/agent.json")]
        older_v1 = await http.get("/.well-known/agent.json", headers={"A2A-Version": "1.0"})
    assert v1.status_code == 200 and by_query.json() == v1.json() == plain.json()
    assert older_v1.json() == v1.json()
    assert "a2a-version" in v1.headers["vary"].lower()
    # A strict proto JSON parse (no unknown member allowed) of the 1.0 card.
    card = ParseDict(plain.json(), AgentCard())
    assert {i.protocol_version for i in card.supported_interfaces} == {"1.0", "0.3"}
    assert not {"url", "protocolVersion", "preferredTransport", "security"} & plain.json().keys()
    assert set(v1.json()["securitySchemes"]["apiKey"]) == {"apiKeySecurityScheme"}
    for legacy in (v03, v03_query, *older):
        with pytest.raises(ParseError):
            ParseDict(legacy.json(), AgentCard())
        assert legacy.json() == v03.json()
    assert v03.json()["url"] == f"{stack.base_url}/"
    assert v03.json()["protocolVersion"] and v03.json()["preferredTransport"] == "JSONRPC"
    assert v03.json()["securitySchemes"]["apiKey"]["in"] == "header"
    assert v1.headers["etag"] == plain.headers["etag"] != v03.headers["etag"]


async def test_task_metadata_keys_are_camel_case(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    sent = await call(
        stack, alice, "SendMessage", {"message": v1_message(QUESTION, unique)}, v1=True
    )
    task_id = sent["result"]["task"]["id"]
    metadata = (await call(stack, alice, "GetTask", {"id": task_id}, v1=True))["result"]["metadata"]
    assert {"protocol", "rootTaskId", "userId", "runId"} <= set(metadata), metadata
    assert not [key for key in metadata if "_" in key], metadata


async def test_a_body_that_is_not_json_and_says_so_is_415(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    headers = {**callers["alice"].headers, "Content-Type": "text/plain", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=TIMEOUT) as http:
        reply = await http.post("/", content=b"{'jsonrpc': '2.0'}", headers=headers)
        assert reply.status_code == 415 and reply.headers["accept"] == "application/json"
        # Valid JSON under a wrong Content-Type is still answered (curl -d sends form).
        form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
        body = b'{"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "run-x"}}'
        answered = await http.post("/", content=body, headers=form)
    assert answered.status_code == 200 and answered.json()["error"]["code"] == -32001


async def test_an_unchanged_task_reads_the_same_twice(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """Two subscribers (or two GetTask calls) of a waiting task see the same
    status message, id included (the TCK's STREAM-ORDER-003)."""
    alice = callers["alice"]
    message = v1_message(f"topic {unique}", unique, metadata={"graph": "approval-flow"})
    asked = await call(stack, alice, "SendMessage", {"message": message}, v1=True)
    task_id = asked["result"]["task"]["id"]
    first = await call(stack, alice, "GetTask", {"id": task_id, "historyLength": 0}, v1=True)
    second = await call(stack, alice, "GetTask", {"id": task_id, "historyLength": 0}, v1=True)
    assert first["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert first["result"] == second["result"]


async def test_a_send_takes_budget_deadline_and_conversation_from_metadata(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """What POST /runs takes in its body, an A2A send takes in its metadata, checked
    the same way: a bad value is -32602 naming the key, and no run starts."""
    alice = callers["alice"]
    options = {
        "graph": "approval-flow",
        "budget": {"max_tool_calls": 7, "on_exhausted": "fail"},
        "deadlineSeconds": 600,
        "conversationId": f"conv-{unique}",
    }
    message = v1_message("Q3 budget", unique, metadata=options)
    sent = await call(stack, alice, "SendMessage", {"message": message}, v1=True)
    task = sent["result"]["task"]
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=alice.headers, timeout=TIMEOUT
    ) as http:
        run = (await http.get(f"/runs/{task['id']}")).json()
        conversation = (await http.get(f"/conversations/conv-{unique}/runs")).json()
        assert conversation["history"] == [task["id"]], conversation
        assert run["deadline_at"] is not None
        assert run["budget"]["limits"]["max_tool_calls"] == 7, run["budget"]

        before = (await http.get("/runs")).json()["total"]
        bad = {
            "deadlineSeconds": 0,
            "budget": {"max_tool_calls": 1, "bogus": True},
            "conversationId": "",
        }
        for key, value in bad.items():
            wrong = v1_message("x", f"{unique}-{key}", metadata={key: value})
            refused = await call(stack, alice, "SendMessage", {"message": wrong}, v1=True)
            assert refused["error"]["code"] == -32602, refused
            details = refused["error"]["data"]  # google.rpc details in 1.0
            fields = [v["field"] for d in details for v in d.get("fieldViolations", [])]
            assert fields and all(f.startswith(f"message.metadata.{key}") for f in fields)
            legacy = {"kind": "message", "role": "user", "messageId": f"l-{unique}-{key}"}
            legacy |= {"parts": [{"kind": "text", "text": "x"}], "metadata": {key: value}}
            old = await call(stack, alice, "message/send", {"message": legacy}, v1=False)
            assert old["error"]["code"] == -32602, old
            assert old["error"]["data"]["errors"][0]["field"].startswith(f"message.metadata.{key}")
        assert (await http.get("/runs")).json()["total"] == before, "no run started"
