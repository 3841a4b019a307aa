"""How a run ends, told truly (issue 28 item 4, issue 27 item 8).

A run closed from outside leaves the inbox within a sweep; a cancel's webhook and
``GET /runs/{id}`` say why and who; an interrupted conversation run names the run
that interrupted it; a blank required answer is a 422; interrupt and rollback need
the right to cancel the run they end; a queued run can be cancelled and never starts.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.conversations import conversation_workflow_id
from spindle.shared.store.archive import RunArchive
from spindle.shared.temporal.closed_runs import ClosedRunSweep
from tests.callback_receiver import callback_receiver
from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import answer, start, wait_for_status
from tests.e2e.test_conversations import (
    approve,
    listing,
    problem,
    states_become,
    submit,
)
from tests.polling import eventually
from tests.recorded_histories import replays_and_is_recorded

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def text_prompt_graph(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "ask",
        "nodes": [
            {
                "id": "ask",
                "type": "prompt",
                "params": {
                    "prompt": "Your name?",
                    "ui_schema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            },
            {"id": "out", "type": "output"},
        ],
        "edges": [{"from": "ask", "to": "out"}],
    }


async def inbox_ids(http: httpx.AsyncClient) -> set[str]:
    ids: set[str] = set()
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200} | ({"after": after} if after else {})
        page = (await http.get("/inbox", params=params)).json()
        ids |= {item["workflow_id"] for item in page["items"]}
        after = page["next"]
        if after is None:
            return ids


async def test_a_run_terminated_through_temporal_leaves_the_inbox_within_a_sweep(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": f"inbox {unique}"})
    wf = run["workflow_id"]
    await wait_for_status(http, wf, {"paused"})

    async def listed() -> bool:
        return wf in await inbox_ids(http)

    await eventually(listed, what="the prompt in the inbox", timeout=30)
    # As `temporal workflow terminate` does: Spindle's code never runs again.
    await stack.temporal.get_workflow_handle(wf).terminate(reason=f"cli {unique}")
    bus = MessageBus.from_settings(stack.settings)
    archive = RunArchive.from_settings(stack.settings)
    try:
        # A document that already says how the run ended (reconciled by a gateway
        # before prompts were closed): only the pass over open prompts finds it.
        await archive.update_run(wf, status="terminated", error=f"terminated: cli {unique}")
        sweep = ClosedRunSweep(
            temporal=stack.temporal, bus=bus, archive=archive, interval=60, batch=10_000
        )
        await sweep.sweep_once()
    finally:
        await bus.close()
        await archive.close()
    assert wf not in await inbox_ids(http)
    late = await answer(http, run, {"data": {"decision": "approve"}})
    assert late.status_code in (404, 409), late.text


async def test_a_cancel_webhook_and_the_run_name_the_reason_and_the_user(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str], unique: str
) -> None:
    alice = callers["alice"]
    async with callback_receiver(lambda n: 200) as receiver, client_for(stack, alice) as http:
        started = await http.post(
            "/runs",
            json={
                "graph": "approval-flow",
                "input": {"topic": f"cancel {unique}"},
                "webhook": {"url": receiver.url, "events": ["canceled"]},
            },
        )
        assert started.status_code == 201, started.text
        wf = started.json()["workflow_id"]
        await wait_for_status(http, wf, {"paused"})
        reason = f"not needed {unique}"
        reply = await http.post(f"/runs/{wf}/cancel", json={"reason": reason})
        assert reply.status_code == 202, reply.text

        async def delivered() -> bool:
            return len(receiver.accepted()) >= 1

        await eventually(delivered, what="the run.canceled webhook", timeout=60)
        body = receiver.accepted()[0]
        assert body["type"] == "run.canceled"
        data = body["data"]
        assert data["ended_by"] == {"kind": "user", "id": alice.user, "reason": reason}
        assert reason in data["error"] and alice.user in data["error"]

        done = await wait_for_status(http, wf, {"canceled"})
        assert done["ended_by"]["kind"] == "user" and done["ended_by"]["id"] == alice.user
        assert reason in done["error"]


async def test_an_interrupted_conversation_run_names_the_run_that_interrupted_it(
    http: httpx.AsyncClient, unique: str
) -> None:
    conversation = f"interrupted-{unique}"
    a = (await submit(http, conversation, unique)).json()
    await wait_for_status(http, a["workflow_id"], {"paused"})
    b_reply = await submit(http, conversation, unique, if_busy="interrupt")
    assert b_reply.status_code == 201, b_reply.text
    b = b_reply.json()
    await states_become(http, conversation, {a["workflow_id"]: "interrupted"})

    async def explained() -> dict[str, Any] | None:
        described: dict[str, Any] = (await http.get(f"/runs/{a['workflow_id']}")).json()
        return described if described["status"] == "canceled" and described["error"] else None

    done = await eventually(explained, what="the interrupted run's reason", timeout=30)
    assert b["workflow_id"] in done["error"] and "history-service" not in done["error"]
    ended_by = done["ended_by"]
    assert (ended_by["kind"], ended_by["id"], ended_by["how"]) == (
        "run",
        b["workflow_id"],
        "interrupted",
    )
    await approve(http, b["workflow_id"])


async def test_a_blank_required_text_answer_is_422_and_the_prompt_stays_open(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = f"blank-{unique}"
    assert (await http.put(f"/graphs/{name}", json=text_prompt_graph(name))).status_code in (
        200,
        201,
    )
    run = await start(http, graph=name, input={})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    for sent in ({"message": ""}, {"data": {"name": ""}}, {"data": {"name": "   "}}):
        refused = await answer(http, run, sent)
        body = problem(refused, 422)
        assert "name" in {e["field"] for e in body["errors"]}, body
    still = await wait_for_status(http, run["workflow_id"], {"paused"})
    assert still["pending_input"]["node_id"] == "ask"
    assert run["workflow_id"] in await inbox_ids(http)
    taken = await answer(http, run, {"message": "Ada"})
    assert taken.status_code == 200, taken.text
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["output"] == {"name": "Ada"}


@pytest.mark.parametrize("if_busy", ["interrupt", "rollback"])
async def test_another_users_conversation_run_is_not_ended_by_interrupt_or_rollback(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    callers: dict[str, Caller],
    unique: str,
    if_busy: str,
) -> None:
    conversation = f"not-yours-{if_busy}-{unique}"
    a = (await submit(http, conversation, unique)).json()
    await wait_for_status(http, a["workflow_id"], {"paused"})
    # bob: same tenant, no role. A direct cancel is refused: so is ending it this way.
    async with client_for(stack, callers["bob"]) as bob:
        assert (await bob.post(f"/runs/{a['workflow_id']}/cancel")).status_code == 403
        refused = problem(await submit(bob, conversation, unique, if_busy=if_busy), 403)
        assert a["workflow_id"] in refused["detail"]
    body = await listing(http, conversation)
    assert [(r["workflow_id"], r["state"]) for r in body["runs"]] == [(a["workflow_id"], "running")]
    assert (await http.get(f"/runs/{a['workflow_id']}")).json()["status"] == "paused"
    # An admin (run-control role) may.
    async with client_for(stack, callers["carol"]) as carol:
        taken = await submit(carol, conversation, unique, if_busy=if_busy)
        assert taken.status_code == 201, taken.text
        await approve(carol, taken.json()["workflow_id"])


async def test_a_queued_run_cancelled_never_starts_and_the_next_moves_up(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    conversation = f"queued-cancel-{unique}"
    a = (await submit(http, conversation, unique)).json()
    b = (await submit(http, conversation, unique, if_busy="enqueue")).json()
    c = (await submit(http, conversation, unique, if_busy="enqueue")).json()
    assert (b["state"], c["state"], c["position"]) == ("queued", "queued", 1)

    reply = await http.post(f"/runs/{b['workflow_id']}/cancel", json={"reason": "changed my mind"})
    assert reply.status_code == 202, reply.text
    body = await states_become(
        http, conversation, {b["workflow_id"]: "canceled", c["workflow_id"]: "queued"}
    )
    [dropped] = [r for r in body["runs"] if r["workflow_id"] == b["workflow_id"]]
    assert dropped["started_at"] is None and dropped["canceled_by"]
    described = (await http.get(f"/runs/{b['workflow_id']}")).json()
    assert described["status"] == "canceled" and "changed my mind" in described["error"]
    assert (await http.post(f"/runs/{b['workflow_id']}/cancel")).status_code == 409

    await approve(http, a["workflow_id"])
    await states_become(http, conversation, {c["workflow_id"]: "running"})
    await approve(http, c["workflow_id"])
    body = await states_become(http, conversation, {c["workflow_id"]: "completed"})
    assert body["history"] == [a["workflow_id"], c["workflow_id"]]
    [dropped] = [r for r in body["runs"] if r["workflow_id"] == b["workflow_id"]]
    assert dropped["state"] == "canceled" and dropped["run_id"] is None

    # The conversation's workflow (a start, two enqueued submits, a queued run taken
    # out, two runs one after the other) replays; recorded (SPINDLE_RECORD_HISTORIES=1,
    # tests/histories/record.py) as tests/histories/conversation.json, which the replay
    # tests replay with every later version of the Conversation workflow. It is idle,
    # not ended: its history up to now is what a worker would replay on a restart.
    workflow_id = conversation_workflow_id(callers["alice"].tenant, conversation)
    await replays_and_is_recorded(stack.temporal, workflow_id, "conversation")
