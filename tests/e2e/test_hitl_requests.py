"""Typed, expiring, assignable human requests over HTTP: who may answer (403), late and
duplicate answers (409), the inbox, every answer attempt in the run bundle, and a 422
naming each bad prompt field when the graph is registered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import answer, start, updates, wait_for_status
from tests.polling import eventually

pytestmark = pytest.mark.e2e

APPROVAL = {
    "type": "object",
    "properties": {"decision": {"enum": ["approve", "reject"]}},
    "required": ["decision"],
}


def assigned_graph(name: str) -> dict[str, Any]:
    """review (bob's, or an approver's) → confirm (expires in 1 s: skipped) → wrap_up."""
    return {
        "name": name,
        "entry": "review",
        "nodes": [
            {
                "id": "review",
                "type": "prompt",
                "params": {
                    "prompt": "Approve {{ input.topic }}?",
                    "ui_schema": APPROVAL,
                    "expires_in_seconds": 3600,
                    "on_expiry": {"answer": {"decision": "reject"}},
                    "assignees": ["bob"],
                    "roles": ["approver"],
                },
            },
            {
                "id": "confirm",
                "type": "prompt",
                "params": {"prompt": "Sure?", "expires_in_seconds": 1, "on_expiry": "skip"},
            },
            {"id": "wrap_up", "type": "prompt", "params": {"prompt": "Anything else?"}},
        ],
        "edges": [{"from": "review", "to": "confirm"}, {"from": "confirm", "to": "wrap_up"}],
    }


@pytest.fixture
async def as_(stack: SpindleStack, callers: dict[str, Caller]) -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []

    def make(user: str) -> httpx.AsyncClient:
        client = client_for(stack, callers[user])
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def inbox_of(client: httpx.AsyncClient, **params: Any) -> list[tuple[str, str]]:
    reply = await client.get("/inbox", params=params)
    assert reply.status_code == 200, reply.text
    return [(item["workflow_id"], item["node_id"]) for item in reply.json()["items"]]


async def test_assigned_expiring_prompts_over_http(
    http: httpx.AsyncClient, as_: Any, unique: str
) -> None:
    name = f"assigned-{unique}"
    registered = await http.put(f"/graphs/{name}", json=assigned_graph(name))
    assert registered.status_code in (200, 201), registered.text
    run = await start(http, graph=name, input={"topic": "the budget"})
    wf = run["workflow_id"]
    bob, carol, mallory = as_("bob"), as_("carol"), as_("mallory")

    described = await wait_for_status(http, wf, {"paused"})
    pending = described["pending_input"]
    assert pending["node_id"] == "review"
    assert pending["assignees"] == ["bob"] and pending["roles"] == ["approver"]
    assert pending["expires_at"] > pending["requested_at"]

    # The inbox: bob (assignee) and carol (admin: run control) see it; alice, its
    # owner, is not assigned; mallory is of another tenant.
    async def in_bobs_inbox() -> bool:
        return (wf, "review") in await inbox_of(bob)

    await eventually(in_bobs_inbox, what="review in bob's inbox", timeout=30)
    assert (wf, "review") in await inbox_of(carol)
    assert (wf, "review") not in await inbox_of(http)
    assert await inbox_of(mallory) == []
    [item] = [i for i in (await bob.get("/inbox")).json()["items"] if i["workflow_id"] == wf]
    assert item["prompt"] == "Approve the budget?"
    assert item["expires_at"] == pending["expires_at"]

    refused = await answer(http, run, {"data": {"decision": "approve"}, "node_id": "review"})
    assert refused.status_code == 403, refused.text
    assert "user bob, role approver" in refused.json()["detail"]
    invalid = await answer(bob, run, {"data": {"decision": "maybe"}, "node_id": "review"})
    assert invalid.status_code == 422, invalid.text
    accepted = await answer(bob, run, {"data": {"decision": "approve"}, "node_id": "review"})
    assert accepted.status_code == 200, accepted.text
    duplicate = await answer(bob, run, {"data": {"decision": "reject"}, "node_id": "review"})
    assert duplicate.status_code == 409, duplicate.text
    assert duplicate.headers["content-type"].startswith("application/problem+json")
    assert duplicate.json()["title"] == "Prompt already answered"
    assert (wf, "review") not in await inbox_of(bob)

    # confirm expires after a second; the stream says so and what was done.
    async def expired() -> dict[str, Any] | None:
        for message in await updates(http, run):
            if (message.get("d") or {}).get("event") == "prompt_expired":
                return message
        return None

    notice = await eventually(expired, what="confirm's expiry on the stream", timeout=30)
    assert notice["d"]["node_id"] == "confirm" and notice["d"]["on_expiry"] == "skip"
    late = await answer(http, run, {"message": "yes", "node_id": "confirm"})
    assert late.status_code == 409, late.text
    assert late.json()["title"] == "Prompt expired"
    assert "too late" in late.json()["detail"]

    still = await wait_for_status(http, wf, {"paused"})
    assert still["pending_input"]["node_id"] == "wrap_up"  # the late answer changed nothing
    done = await answer(http, run, {"message": "no", "node_id": "wrap_up"})
    assert done.status_code == 200, done.text
    finished = await wait_for_status(http, wf, {"completed"})
    reports = {r["node_id"]: r["status"] for r in finished["node_reports"]}
    assert reports == {"review": "SUCCESS", "confirm": "SKIPPED", "wrap_up": "SUCCESS"}

    bundle = await http.get(f"/runs/{wf}/bundle")
    assert bundle.status_code == 200
    attempts = bundle.json()["answer_attempts"]
    seen = [(a["node_id"], a["user_id"], a["outcome"]) for a in attempts]
    assert sorted(seen) == sorted(
        [
            ("review", "alice", "forbidden"),
            ("review", "bob", "invalid"),
            ("review", "bob", "accepted"),
            ("review", "bob", "duplicate"),
            ("confirm", "alice", "late"),
            ("wrap_up", "alice", "accepted"),
        ]
    )
    assert all(a["at"] for a in attempts)


async def test_a_run_that_ends_while_its_prompt_is_open_leaves_the_inbox(
    http: httpx.AsyncClient, as_: Any, unique: str
) -> None:
    # finish_run closes a run's prompts only when the run asked one: this is the
    # run that did, ended (canceled) with its prompt still open.
    name = f"ends-open-{unique}"
    registered = await http.put(f"/graphs/{name}", json=assigned_graph(name))
    assert registered.status_code in (200, 201), registered.text
    run = await start(http, graph=name, input={"topic": "the roadmap"})
    wf = run["workflow_id"]
    bob = as_("bob")
    await wait_for_status(http, wf, {"paused"})

    async def in_bobs_inbox() -> bool:
        return (wf, "review") in await inbox_of(bob)

    await eventually(in_bobs_inbox, what="review in bob's inbox", timeout=30)
    canceled = await http.post(f"/runs/{wf}/cancel")
    assert canceled.status_code in (200, 202), canceled.text
    await wait_for_status(http, wf, {"canceled"})
    assert (wf, "review") not in await inbox_of(bob)
    late = await answer(bob, run, {"data": {"decision": "approve"}, "node_id": "review"})
    assert late.status_code == 409, late.text


async def test_inbox_pages_and_refuses_a_bad_limit(http: httpx.AsyncClient, unique: str) -> None:
    name = f"inbox-pages-{unique}"
    graph = {
        "name": name,
        "entry": "ask",
        "nodes": [{"id": "ask", "type": "prompt", "params": {"prompt": "Hello?"}}],
        "edges": [],
    }
    assert (await http.put(f"/graphs/{name}", json=graph)).status_code in (200, 201)
    runs = [await start(http, graph=name, input={}) for _ in range(3)]
    mine = {r["workflow_id"] for r in runs}

    async def all_listed() -> list[str] | None:
        ids: list[str] = []
        after: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 1} | ({"after": after} if after else {})
            page = (await http.get("/inbox", params=params)).json()
            ids += [i["workflow_id"] for i in page["items"]]
            after = page["next"]
            if after is None:
                break
        return ids if mine <= set(ids) else None

    paged = await eventually(all_listed, what="the three prompts, a page each", timeout=30)
    assert len(paged) == len(set(paged)), "no entry twice across pages"
    for bad in ({"limit": 0}, {"limit": 201}, {"after": ""}):
        reply = await http.get("/inbox", params=bad)
        assert reply.status_code == 422, reply.text
        assert reply.json()["errors"][0]["field"] == next(iter(bad))
    for run in runs:
        assert (await answer(http, run, {"message": "hi"})).status_code == 200


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"expires_in_seconds": 0}, "params.expires_in_seconds"),
        ({"expires_in_seconds": 30 * 24 * 3600 + 1}, "params.expires_in_seconds"),
        ({"expires_in_seconds": 60, "on_expiry": "later"}, "params.on_expiry"),
        ({"on_expiry": "skip"}, "params.on_expiry"),
        (
            {"expires_in_seconds": 60, "on_expiry": {"answer": {"decision": "maybe"}}},
            "params.on_expiry.answer.decision",
        ),
        ({"assignees": "bob"}, "params.assignees"),
        ({"assignees": [7]}, "params.assignees.0"),
        ({"roles": [""]}, "params.roles.0"),
    ],
)
async def test_a_bad_prompt_field_is_a_422_naming_it(
    http: httpx.AsyncClient, unique: str, params: dict[str, Any], field: str
) -> None:
    name = f"bad-prompt-{unique}"
    graph = {
        "name": name,
        "entry": "ask",
        "nodes": [{"id": "ask", "type": "prompt", "params": {"ui_schema": APPROVAL, **params}}],
        "edges": [],
    }
    reply = await http.put(f"/graphs/{name}", json=graph)
    assert reply.status_code == 422, reply.text
    assert field in [e["field"] for e in reply.json()["errors"]]
