"""Busy-run policies over HTTP: runs of one conversation, one at a time.

Each conversation run here waits on a prompt, so "the conversation is busy" is a
fact the test controls: the run is busy until the test answers it.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from spindle.shared.contracts.conversations import conversation_workflow_id
from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import T, answer, updates, wait_for_status
from tests.polling import eventually
from tests.recorded_histories import replays_and_is_recorded

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

PROBLEM = "application/problem+json"


def prompt_graph(name: str) -> dict[str, Any]:
    """Asks, then outputs the answer: busy until answered."""
    return {
        "name": name,
        "entry": "ask",
        "nodes": [
            {
                "id": "ask",
                "type": "prompt",
                "params": {
                    "prompt": "Go on?",
                    "ui_schema": {
                        "type": "object",
                        "properties": {"decision": {"type": "string"}},
                        "required": ["decision"],
                    },
                },
            },
            {"id": "out", "type": "output"},
        ],
        "edges": [{"from": "ask", "to": "out"}],
    }


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM), reply.headers
    body: dict[str, Any] = reply.json()
    assert body["status"] == status and body["detail"]
    return body


async def submit(
    http: httpx.AsyncClient, conversation: str, unique: str, **extra: Any
) -> httpx.Response:
    return await http.post(
        "/runs",
        json={
            "graph_spec": prompt_graph(f"conv-{unique}"),
            "conversation_id": conversation,
            **extra,
        },
    )


async def listing(http: httpx.AsyncClient, conversation: str) -> dict[str, Any]:
    reply = await http.get(f"/conversations/{conversation}/runs")
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def states_become(
    http: httpx.AsyncClient, conversation: str, wanted: dict[str, str]
) -> dict[str, Any]:
    """Wait until each run (workflow id → state) is listed in that state."""

    async def reached() -> dict[str, Any] | None:
        body = await listing(http, conversation)
        states = {r["workflow_id"]: r["state"] for r in body["runs"]}
        return body if all(states.get(w) == s for w, s in wanted.items()) else None

    return await eventually(reached, what=f"{conversation}: {wanted}", timeout=60, interval=0.1)


async def approve(http: httpx.AsyncClient, workflow_id: str) -> None:
    """Answer the run's prompt once it waits (the run id from its description)."""
    described = await wait_for_status(http, workflow_id, {"paused"}, timeout=60)
    run = {"workflow_id": workflow_id, "run_id": described["run_id"]}
    reply = await answer(http, run, {"data": {"decision": "go"}})
    assert reply.status_code == 200, reply.text


async def test_reject_names_the_running_run_and_the_list_is_the_tenants_own(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    conversation = f"reject-{unique}"
    first = await submit(http, conversation, unique)
    assert first.status_code == 201, first.text
    a = first.json()
    assert a["state"] == "started" and a["run_id"] and a["conversation_id"] == conversation
    await wait_for_status(http, a["workflow_id"], {"paused"})

    refused = problem(await submit(http, conversation, unique, if_busy="reject"), 409)
    assert a["workflow_id"] in refused["detail"]
    # The default policy is reject too.
    assert a["workflow_id"] in problem(await submit(http, conversation, unique), 409)["detail"]

    body = await listing(http, conversation)
    assert body["conversation_id"] == conversation and body["current"] == a["workflow_id"]
    assert [(r["workflow_id"], r["state"]) for r in body["runs"]] == [(a["workflow_id"], "running")]

    # Another tenant: the same conversation id is unknown, as an unknown one is.
    async with client_for(stack, callers["mallory"]) as mallory:
        theirs = problem(await mallory.get(f"/conversations/{conversation}/runs"), 404)
        unknown = problem(await mallory.get(f"/conversations/none-{unique}/runs"), 404)
        assert theirs["detail"].replace(conversation, "ID") == unknown["detail"].replace(
            f"none-{unique}", "ID"
        )
        # Their run of the same conversation id is theirs alone: it starts at once.
        own = await submit(mallory, conversation, unique, if_busy="reject")
        assert own.status_code == 201, own.text
        assert own.json()["state"] == "started"
        await approve(mallory, own.json()["workflow_id"])

    await approve(http, a["workflow_id"])
    await states_become(http, conversation, {a["workflow_id"]: "completed"})
    # Idle again: a rejecting start starts.
    again = await submit(http, conversation, unique, if_busy="reject")
    assert again.status_code == 201 and again.json()["state"] == "started", again.text
    await approve(http, again.json()["workflow_id"])


async def test_enqueued_runs_start_one_after_the_other_in_order(
    http: httpx.AsyncClient, unique: str
) -> None:
    conversation = f"enqueue-{unique}"
    a = (await submit(http, conversation, unique)).json()
    b_reply = await submit(http, conversation, unique, if_busy="enqueue")
    c_reply = await submit(http, conversation, unique, if_busy="enqueue")
    assert b_reply.status_code == c_reply.status_code == 201, (b_reply.text, c_reply.text)
    b, c = b_reply.json(), c_reply.json()
    assert (b["state"], b["position"], b["run_id"]) == ("queued", 0, "")
    assert (c["state"], c["position"]) == ("queued", 1)
    # A queued run is already the caller's to describe.
    queued = await http.get(f"/runs/{b['workflow_id']}")
    assert queued.status_code == 200, queued.text

    await approve(http, a["workflow_id"])
    body = await states_become(
        http,
        conversation,
        {a["workflow_id"]: "completed", b["workflow_id"]: "running", c["workflow_id"]: "queued"},
    )
    await approve(http, b["workflow_id"])
    await states_become(
        http, conversation, {b["workflow_id"]: "completed", c["workflow_id"]: "running"}
    )
    await approve(http, c["workflow_id"])
    body = await states_become(http, conversation, {c["workflow_id"]: "completed"})

    runs = body["runs"]
    assert [r["workflow_id"] for r in runs] == [
        a["workflow_id"],
        b["workflow_id"],
        c["workflow_id"],
    ]
    for before, after in itertools.pairwise(runs):
        assert before["ended_at"] <= after["started_at"], (before, after)
    assert body["history"] == [a["workflow_id"], b["workflow_id"], c["workflow_id"]]
    for run in (b, c):
        done = await wait_for_status(http, run["workflow_id"], {"completed"})
        assert done["output"] == {"decision": "go"}


async def test_interrupt_stops_the_running_run_gracefully_then_starts(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    conversation = f"interrupt-{unique}"
    a = (await submit(http, conversation, unique)).json()
    await wait_for_status(http, a["workflow_id"], {"paused"})
    b_reply = await submit(http, conversation, unique, if_busy="interrupt")
    assert b_reply.status_code == 201, b_reply.text
    b = b_reply.json()

    body = await states_become(
        http, conversation, {a["workflow_id"]: "interrupted", b["workflow_id"]: "running"}
    )
    [first] = [r for r in body["runs"] if r["workflow_id"] == a["workflow_id"]]
    assert first["ended_by"] == b["workflow_id"] and first["in_history"]
    assert (await wait_for_status(http, a["workflow_id"], {"canceled"}))["status"] == "canceled"
    # Gracefully: the interrupted run ended its own stream.
    said = await updates(http, {"workflow_id": a["workflow_id"], "run_id": a["run_id"]})
    assert said[-1]["t"] == T.TERMINATED

    await approve(http, b["workflow_id"])
    body = await states_become(http, conversation, {b["workflow_id"]: "completed"})
    assert body["history"] == [a["workflow_id"], b["workflow_id"]]
    # The interrupt path of the Conversation workflow replays (a recorded history).
    workflow_id = conversation_workflow_id(callers["alice"].tenant, conversation)
    await replays_and_is_recorded(stack.temporal, workflow_id, "conversation-interrupt")


async def test_rollback_terminates_the_running_run_and_leaves_it_out_of_the_history(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    conversation = f"rollback-{unique}"
    a = (await submit(http, conversation, unique)).json()
    await wait_for_status(http, a["workflow_id"], {"paused"})
    b_reply = await submit(http, conversation, unique, if_busy="rollback")
    assert b_reply.status_code == 201, b_reply.text
    b = b_reply.json()

    body = await states_become(
        http, conversation, {a["workflow_id"]: "rolled_back", b["workflow_id"]: "running"}
    )
    [first] = [r for r in body["runs"] if r["workflow_id"] == a["workflow_id"]]
    assert first["ended_by"] == b["workflow_id"] and not first["in_history"]
    assert body["history"] == [b["workflow_id"]]
    described = await wait_for_status(http, a["workflow_id"], {"terminated"})
    assert described["status"] == "terminated"
    said = await updates(http, {"workflow_id": a["workflow_id"], "run_id": a["run_id"]})
    assert said[-1]["t"] == T.TERMINATED and b["workflow_id"] in said[-1]["m"]

    await approve(http, b["workflow_id"])
    body = await states_become(http, conversation, {b["workflow_id"]: "completed"})
    assert body["history"] == [b["workflow_id"]]
    # The rollback path of the Conversation workflow replays (a recorded history).
    workflow_id = conversation_workflow_id(callers["alice"].tenant, conversation)
    await replays_and_is_recorded(stack.temporal, workflow_id, "conversation-rollback")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"conversation_id": "c-1", "if_busy": "sometimes"}, "if_busy"),
        ({"if_busy": "enqueue"}, "if_busy"),
        ({"conversation_id": "has space"}, "conversation_id"),
        ({"conversation_id": ""}, "conversation_id"),
        ({"conversation_id": "x" * 129}, "conversation_id"),
        ({"conversation_id": 7}, "conversation_id"),
    ],
)
async def test_bad_conversation_fields_are_422_naming_the_field(
    http: httpx.AsyncClient, unique: str, extra: dict[str, Any], field: str
) -> None:
    reply = await http.post("/runs", json={"graph_spec": prompt_graph(f"bad-{unique}"), **extra})
    body = problem(reply, 422)
    assert field in {e["field"] for e in body["errors"]}, body


async def test_a_malformed_conversation_id_in_the_path_is_422(http: httpx.AsyncClient) -> None:
    body = problem(await http.get("/conversations/has%20space/runs"), 422)
    assert "conversation_id" in {e["field"] for e in body["errors"]}, body
