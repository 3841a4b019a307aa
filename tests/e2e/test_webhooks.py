"""Completion webhooks (``webhook`` on ``POST /runs``): a local receiver checks
each POST's Standard Webhooks signature the way a receiver's own code would
(HMAC-SHA256 over ``id.timestamp.body`` with the secret's bytes), for
completed, failed and input_required; a refused URL is a 422 naming
``webhook.url``; a failing receiver gets the event again, later."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any

import httpx
import pytest

from tests.callback_receiver import CallbackReceiver, callback_receiver
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.run_driver import answer
from tests.polling import eventually

pytestmark = pytest.mark.e2e

TIMEOUT = httpx.Timeout(60.0, connect=5.0)


def verified(receiver: CallbackReceiver, index: int, secret: str) -> dict[str, Any]:
    """The body of POST ``index``, after checking its signature as a receiver would."""
    headers = receiver.headers[index]
    message_id, stamp = headers["webhook-id"], headers["webhook-timestamp"]
    assert abs(time.time() - int(stamp)) < 300, "a fresh timestamp"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{message_id}.{stamp}.".encode() + receiver.raw[index]
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [
        s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1,")
    ]
    assert any(hmac.compare_digest(expected, s) for s in given), headers
    return receiver.bodies[index]


async def arrived(receiver: CallbackReceiver, count: int) -> None:
    async def enough() -> bool:
        return len(receiver.accepted()) >= count

    await eventually(enough, what=f"{count} accepted webhook POSTs", timeout=60)


def client(stack: SpindleStack, caller: Caller) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=stack.base_url, headers=caller.headers, timeout=TIMEOUT)


async def test_input_required_then_completed_signed_with_the_secret_returned_once(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    async with (
        callback_receiver(lambda n: 200) as receiver,
        client(stack, callers["alice"]) as http,
    ):
        started = await http.post(
            "/runs",
            json={
                "graph": "approval-flow",
                "input": {"topic": f"webhook {unique}"},
                "webhook": {"url": receiver.url},
            },
        )
        assert started.status_code == 201, started.text
        run = started.json()
        hook = run["webhook"]
        secret = hook["secret"]
        assert secret.startswith("whsec_") and "*" not in secret, "generated, shown once"
        assert hook["url"] == receiver.url and "completed" in hook["events"]

        await arrived(receiver, 1)
        asked = verified(receiver, 0, secret)
        assert asked["type"] == "run.input_required"
        assert asked["data"]["workflow_id"] == run["workflow_id"]
        assert asked["data"]["input"]["node_id"] == "review"
        assert "decision" in asked["data"]["input"]["ui_schema"]["properties"]

        reply = await answer(http, run, {"message": '{"decision": "approve", "comment": "ok"}'})
        assert reply.status_code == 200, reply.text
        await arrived(receiver, 2)
        done = verified(receiver, 1, secret)
        assert done["type"] == "run.completed"
        assert done["data"]["status"] == "completed"
        assert done["data"]["output"]["decision"] == "approve"
        ids = [h["webhook-id"] for h in receiver.headers]
        assert len(set(ids)) == 2, "one id per event"
        assert secret not in str(await http.get(f"/runs/{run['workflow_id']}")), "never read back"


async def test_failed_run_with_my_own_secret_is_retried_after_the_receiver_fails(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    graph = {
        "name": f"hook-calc-{unique}",
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
    # The receiver fails the first two POSTs: the same event comes back later.
    async with (
        callback_receiver(lambda n: 503 if n < 2 else 200) as receiver,
        client(stack, callers["alice"]) as http,
    ):
        registered = await http.put(f"/graphs/{graph['name']}", json=graph)
        assert registered.status_code in (200, 201), registered.text
        started = await http.post(
            "/runs",
            json={
                "graph": graph["name"],
                "input": {"expression": "1 / 0"},
                "webhook": {"url": receiver.url, "events": ["failed"], "secret": secret},
            },
        )
        assert started.status_code == 201, started.text
        assert started.json()["webhook"]["secret"] == "whsec_********", "yours is not echoed"
        await arrived(receiver, 1)

    assert receiver.statuses == [503, 503, 200]
    assert len({h["webhook-id"] for h in receiver.headers}) == 1, "a retry keeps its id"
    for index in range(3):
        failed = verified(receiver, index, secret)
        assert failed["type"] == "run.failed"
    assert "division by zero" in failed["data"]["error"]


@pytest.mark.parametrize(
    ("webhook", "field", "reason"),
    [
        ({"url": "http://10.1.2.3/hook"}, "webhook.url", "private"),
        ({"url": "http://169.254.169.254/latest"}, "webhook.url", "metadata"),
        ({"url": "ftp://example.com/x"}, "url", "pattern"),
        ({"url": "http://127.0.0.1:9/x", "events": ["finished"]}, "events", "literal"),
        ({"url": "http://127.0.0.1:9/x", "secret": "hunter2"}, "secret", "whsec_"),
        ({"url": "http://127.0.0.1:9/x", "colour": "red"}, "colour", "extra"),
    ],
)
async def test_bad_webhook_is_422_naming_the_field(
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    webhook: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    async with client(stack, callers["alice"]) as http:
        refused = await http.post(
            "/runs", json={"graph": "approval-flow", "input": {"topic": "x"}, "webhook": webhook}
        )
    assert refused.status_code == 422, refused.text
    text = refused.text.lower()
    assert field in text and reason in text, refused.text
    assert "hunter2" not in refused.text, "a secret is never repeated back"


async def test_a_run_terminated_from_temporal_sends_terminated(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    """No finish_run runs for a run Temporal closed itself: the gateway that
    notices the close sends the event."""
    async with (
        callback_receiver(lambda n: 200) as receiver,
        client(stack, callers["alice"]) as http,
    ):
        started = await http.post(
            "/runs",
            json={
                "graph": "approval-flow",
                "input": {"topic": f"terminated {unique}"},
                "webhook": {"url": receiver.url, "events": ["input_required", "terminated"]},
            },
        )
        assert started.status_code == 201, started.text
        run = started.json()
        secret = run["webhook"]["secret"]
        await arrived(receiver, 1)
        assert verified(receiver, 0, secret)["type"] == "run.input_required"
        reason = f"operator stopped it {unique}"
        await stack.temporal.get_workflow_handle(run["workflow_id"]).terminate(reason=reason)
        # Reading the run is one of the ways the gateway notices the close.
        described = await http.get(f"/runs/{run['workflow_id']}")
        assert described.json()["status"] == "terminated", described.text
        await arrived(receiver, 2)
    ended = verified(receiver, 1, secret)
    assert ended["type"] == "run.terminated"
    assert ended["data"]["status"] == "terminated" and reason in ended["data"]["error"]
    assert len(receiver.bodies) == 2, "sent once"
