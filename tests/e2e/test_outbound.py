"""Push URLs pass the outbound policy at registration (issue 15, M1), over HTTP.

The e2e stack allows 127.0.0.1 only (its callback receivers listen there): every
other loopback spelling, private and metadata address, userinfo and a caller-set
``Host`` header is refused with a clear error before anything is stored or started.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.test_a2a import TIMEOUT, rpc

pytestmark = pytest.mark.e2e

PUSH_FIELD = "configuration.push_notification_config"
REFUSED = [
    ("http://127.0.0.2:6379/", "loopback"),
    ("http://127.2/", "loopback"),
    ("http://0x7f000002:7233/", "loopback"),
    ("http://[::]:6379/", "unspecified"),
    ("http://[::1]:6379/", "loopback"),
    ("http://[::ffff:10.0.0.1]/", "private"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://user:pw@127.0.0.1:9/hook", "credentials"),
]


def execute_with_push(config: dict[str, Any]) -> dict[str, Any]:
    tree = [
        {"id": "root", "name": "push target check"},
        {
            "id": "a",
            "name": "a",
            "parent_id": "root",
            "schemas": {"method": "tool"},
            "params": {"tool": "word_count"},
            "inputs": {"text": "x"},
        },
    ]
    return {
        "jsonrpc": "2.0",
        "id": "x",
        "method": "tasks.execute",
        "params": {"tasks": tree},
        "configuration": {"push_notification_config": config},
    }


@pytest.mark.parametrize(("url", "why"), REFUSED)
async def test_tasks_execute_refuses_a_push_url_the_policy_refuses(
    http: httpx.AsyncClient, url: str, why: str
) -> None:
    before = (await http.post("/", json=_list_call())).json()["result"]["total"]
    error = (await http.post("/", json=execute_with_push({"url": url}))).json()["error"]
    assert error["code"] == -32602
    assert error["data"]["field"] == f"{PUSH_FIELD}.url"
    assert why in error["data"]["detail"]
    assert "pw" not in error["data"]["detail"]
    after = (await http.post("/", json=_list_call())).json()["result"]["total"]
    assert after == before, "nothing was created"


async def test_tasks_execute_refuses_a_caller_set_host_header(http: httpx.AsyncClient) -> None:
    config = {"url": "http://127.0.0.1:9/hook", "headers": {"Host": "redis.internal"}}
    error = (await http.post("/", json=execute_with_push(config))).json()["error"]
    assert error["code"] == -32602
    assert error["data"]["field"] == f"{PUSH_FIELD}.headers"


async def test_a2a_push_configs_are_refused_on_set_and_inline(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    message = {
        "kind": "message",
        "role": "user",
        "messageId": f"push-ssrf-{unique}",
        "parts": [{"kind": "text", "text": f"ssrf {unique}"}],
        "metadata": {"graph": "approval-flow"},
    }
    runs_before = await _run_total(stack, alice)
    inline = await rpc(
        stack,
        alice,
        "message/send",
        {
            "message": message,
            "configuration": {
                "blocking": False,
                "pushNotificationConfig": {"url": "http://169.254.169.254/"},
            },
        },
    )
    assert inline["error"]["code"] == -32602, inline
    assert inline["error"]["data"]["field"] == "url"
    assert "metadata" in inline["error"]["message"]
    assert await _run_total(stack, alice) == runs_before, "no run started"

    sent = await rpc(
        stack, alice, "message/send", {"message": message, "configuration": {"blocking": False}}
    )
    task_id = sent["result"]["id"]
    for url in ("http://[::1]:6379/", "http://0177.0.0.2/", "http://u:p@127.0.0.1/"):
        refused = await rpc(
            stack,
            alice,
            "tasks/pushNotificationConfig/set",
            {"taskId": task_id, "pushNotificationConfig": {"url": url}},
        )
        assert refused["error"]["code"] == -32602, refused
        assert "outbound" in refused["error"]["message"]
    listed = await rpc(stack, alice, "tasks/pushNotificationConfig/list", {"id": task_id})
    assert listed["result"] == [], "no refused config was stored"


def _list_call() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": "l", "method": "tasks.list", "params": {}}


async def _run_total(stack: SpindleStack, caller: Caller) -> int:
    async with httpx.AsyncClient(
        base_url=stack.base_url, headers=caller.headers, timeout=TIMEOUT
    ) as client:
        total: int = (await client.get("/runs")).json()["total"]
    return total
