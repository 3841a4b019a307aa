"""Workstreams over HTTP on the real stack: launch, watch, steer, message,
terminate, completion with merged artifacts, and what is refused.

The parent is an approval-flow run paused on its human prompt, so it stays
open for as long as a test needs. Everything a child says arrives on the
parent's one SSE stream, attributed by ``w`` (its launch id).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import T, start, wait_for_status
from tests.e2e.sse_client import SseConnection, SseEvent, open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e

WAIT = 30.0


@pytest.fixture
async def parent(http: httpx.AsyncClient, examples: list[str], unique: str) -> dict[str, Any]:
    """alice's run, paused on its approval prompt (it stays open)."""
    run = await start(http, graph="approval-flow", input={"topic": f"workstreams {unique}"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    return run


@pytest.fixture
async def stream(http: httpx.AsyncClient, parent: dict[str, Any]) -> AsyncIterator[SseConnection]:
    """The parent's SSE stream, read from its start."""
    url = f"/runs/{parent['workflow_id']}/{parent['run_id']}/stream"
    async with open_sse(http, url) as connection:
        assert connection.response.status_code == 200
        yield connection


def ws_url(run: dict[str, Any], launch_id: str | None = None, action: str | None = None) -> str:
    url = f"/runs/{run['workflow_id']}/workstreams"
    if launch_id is not None:
        url += f"/{launch_id}"
    if action is not None:
        url += f"/{action}"
    return url


async def launch(http: httpx.AsyncClient, run: dict[str, Any], **body: Any) -> dict[str, Any]:
    reply = await http.post(ws_url(run), json=body)
    assert reply.status_code == 202, reply.text
    ack: dict[str, Any] = reply.json()
    return ack


async def info(http: httpx.AsyncClient, run: dict[str, Any], launch_id: str) -> dict[str, Any]:
    reply = await http.get(ws_url(run, launch_id))
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def until_info(
    http: httpx.AsyncClient, run: dict[str, Any], launch_id: str, **wanted: Any
) -> dict[str, Any]:
    """Poll the workstream until each ``wanted`` field has its value."""

    async def matches() -> dict[str, Any] | None:
        current = await info(http, run, launch_id)
        return current if all(current[k] == v for k, v in wanted.items()) else None

    return await eventually(matches, what=f"{launch_id} has {wanted}", timeout=WAIT, interval=0.1)


def of(launch_id: str, message_type: int | None = None) -> Any:
    """An SSE predicate: a message of this workstream (and type)."""

    def check(event: SseEvent) -> bool:
        message = event.json()
        return message.get("w") == launch_id and (
            message_type is None or message["t"] == message_type
        )

    return check


async def steer_and_ack(
    http: httpx.AsyncClient,
    run: dict[str, Any],
    stream: SseConnection,
    launch_id: str,
    command: str,
    text: str | None = None,
) -> dict[str, Any]:
    """Steer; return the child's acknowledgement message from the stream."""
    body = {"command": command, **({"text": text} if text else {})}
    reply = await http.post(ws_url(run, launch_id, "steer"), json=body)
    assert reply.status_code == 202, reply.text
    steer_id = reply.json()["steer_id"]
    note = await stream.until(
        lambda e: of(launch_id)(e) and (e.json().get("d") or {}).get("steer_id") == steer_id,
        timeout=WAIT,
    )
    message: dict[str, Any] = note.json()
    assert message["d"]["command"] == command
    return message


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = reply.json()
    return body


async def test_an_interactive_workstream_is_watched_steered_messaged_and_terminated(
    http: httpx.AsyncClient, parent: dict[str, Any], stream: SseConnection
) -> None:
    ack = await launch(
        http,
        parent,
        task="List three risks of the Q3 budget.",
        interactive=True,
        deadline_seconds=600,
        label="risks",
    )
    launch_id = ack["launch_id"]
    assert launch_id.startswith("ws-") and ack["workstream_id"] == launch_id
    assert ack["child_workflow_id"] == f"{parent['workflow_id']}.{launch_id}"
    assert ack["deadline_seconds"] == 600

    # The child talks on the parent's stream, attributed to itself.
    first = await stream.until(of(launch_id), timeout=WAIT)
    assert first.json()["w"] == launch_id
    answered = first if of(launch_id, T.ANSWER)(first) else None
    answered = answered or await stream.until(of(launch_id, T.ANSWER), timeout=WAIT)
    assert "three risks" in answered.json()["m"]

    # Having done its task, it waits for a message (blocked), still running.
    waiting = await until_info(http, parent, launch_id, phase="blocked")
    assert waiting["state"] == "running" and waiting["interactive"] is True
    assert waiting["label"] == "risks" and waiting["task"].startswith("List three risks")
    assert waiting["deadline_seconds"] == 600
    assert 0 <= waiting["deadline_used_pct"] < 100
    assert waiting["elapsed_seconds"] >= 0 and waiting["iteration"] >= 1
    listed = (await http.get(ws_url(parent))).json()["workstreams"]
    assert [w["launch_id"] for w in listed] == [launch_id]

    steered = await http.post(
        ws_url(parent, launch_id, "steer"),
        json={"command": "add_instruction", "text": "Cite a figure for each risk."},
    )
    assert steered.status_code == 202, steered.text
    steer = steered.json()
    assert steer["launch_id"] == launch_id and steer["command"] == "add_instruction"
    assert steer["status"] == "queued" and steer["steer_id"].startswith("s-")

    sent = await http.post(
        ws_url(parent, launch_id, "messages"), json={"message": "And which risk is the worst?"}
    )
    assert sent.status_code == 202, sent.text
    assert sent.json()["launch_id"] == launch_id and sent.json()["message_id"].startswith("m-")

    # The steer is acknowledged, naming the step it was applied at.
    acknowledged = await stream.until(
        lambda e: (
            of(launch_id)(e) and (e.json().get("d") or {}).get("steer_id") == steer["steer_id"]
        ),
        timeout=WAIT,
    )
    note = acknowledged.json()
    assert note["d"]["status"] == "applied" and note["d"]["applied_at_step"] >= 1
    assert f"step {note['d']['applied_at_step']}" in note["m"]
    # The message, sent while the child was busy, is queued and acknowledged as a
    # steer is, with the step it was applied at; then it gets its answer.
    message_id = sent.json()["message_id"]
    assert sent.json()["status"] == "queued"
    applied = await stream.until(
        lambda e: of(launch_id)(e) and (e.json().get("d") or {}).get("message_id") == message_id,
        timeout=WAIT,
    )
    ack = applied.json()
    assert ack["t"] == T.SYSTEM and ack["d"]["status"] == "applied"
    assert ack["d"]["applied_at_step"] >= 1
    assert ack["m"] == f"message {message_id} applied at step {ack['d']['applied_at_step']}"
    await stream.until(of(launch_id, T.ANSWER), timeout=WAIT)

    # Paused, it answers nothing until resumed: the answer comes after the resume.
    paused = await steer_and_ack(http, parent, stream, launch_id, "pause_requested")
    assert paused["d"]["status"] == "applied"
    held = await http.post(ws_url(parent, launch_id, "messages"), json={"message": "Any news?"})
    assert held.status_code == 202, held.text
    mark = len(stream.events)
    resumed = await steer_and_ack(http, parent, stream, launch_id, "resume_requested")
    assert resumed["d"]["status"] == "applied"
    assert not [e for e in stream.events[mark:] if of(launch_id, T.ANSWER)(e)]
    await stream.until(of(launch_id, T.ANSWER), timeout=WAIT)

    ended = await http.post(ws_url(parent, launch_id, "terminate"))
    assert ended.status_code == 202, ended.text
    assert ended.json()["launch_id"] == launch_id
    assert ended.json()["state"] in ("canceling", "canceled")
    closed = await until_info(http, parent, launch_id, state="canceled")
    assert closed["phase"] == "done"

    # A finished workstream takes no more steering or messages; the run goes on.
    late = await http.post(ws_url(parent, launch_id, "steer"), json={"command": "pause_requested"})
    assert launch_id in problem(late, 409)["detail"]
    assert (
        await http.post(ws_url(parent, launch_id, "messages"), json={"message": "still there?"})
    ).status_code == 409
    assert (await http.post(ws_url(parent, launch_id, "terminate"))).status_code == 409
    run = (await http.get(f"/runs/{parent['workflow_id']}")).json()
    assert run["status"] == "paused"


async def test_a_completed_workstream_reports_to_main_and_merges_its_result(
    http: httpx.AsyncClient, parent: dict[str, Any], stream: SseConnection
) -> None:
    ack = await launch(http, parent, task="Summarise the Q3 budget draft in one line.")
    launch_id = ack["launch_id"]

    # Children end on their own: a COMPLETE with w, which does not close the stream...
    done = await stream.until(of(launch_id, T.COMPLETE), timeout=WAIT)
    assert done.json()["d"]["status"] == "completed"
    # ... and the parent's main workstream gets a SYSTEM message with the summary.
    report = await stream.until(
        lambda e: (
            "w" not in e.json()
            and e.json()["t"] == T.SYSTEM
            and launch_id in (e.json().get("m") or "")
        ),
        timeout=WAIT,
    )
    summary_seen = report.json()["m"]

    finished = await until_info(http, parent, launch_id, state="completed")
    assert finished["phase"] == "done" and finished["summary"]
    assert finished["summary"][:40] in summary_seen
    merged = f"files/{launch_id}/result.md"
    assert merged in finished["artifacts"]

    files_url = f"/runs/{parent['workflow_id']}/{parent['run_id']}/files"
    names = [f["name"] for f in (await http.get(files_url)).json()["files"]]
    assert merged in names
    download = await http.get(f"{files_url}/{merged}")
    assert download.status_code == 200, download.text
    assert download.headers["content-type"].startswith("text/markdown")
    assert finished["summary"][:40] in download.text

    # Finished: steering is a conflict, a message to a non-interactive one too.
    late = await http.post(
        ws_url(parent, launch_id, "steer"), json={"command": "add_instruction", "text": "more"}
    )
    assert launch_id in problem(late, 409)["detail"]
    assert (
        await http.post(ws_url(parent, launch_id, "messages"), json={"message": "hi"})
    ).status_code == 409
    # The parent is still waiting for its human.
    assert not stream.ended
    assert (await http.get(f"/runs/{parent['workflow_id']}")).json()["status"] == "paused"


async def test_a_workstream_without_merge_leaves_the_parents_files_alone(
    http: httpx.AsyncClient, parent: dict[str, Any], stream: SseConnection
) -> None:
    ack = await launch(http, parent, task="Draft a title.", merge_child_artifacts=False)
    finished = await until_info(http, parent, ack["launch_id"], state="completed")
    assert finished["artifacts"] == []
    files_url = f"/runs/{parent['workflow_id']}/{parent['run_id']}/files"
    assert (await http.get(files_url)).json()["files"] == []


async def test_bad_input_gets_a_clear_4xx_and_the_run_goes_on(
    http: httpx.AsyncClient, parent: dict[str, Any]
) -> None:
    for deadline in (10, 29, 1801):
        refused = problem(
            await http.post(ws_url(parent), json={"task": "x", "deadline_seconds": deadline}), 422
        )
        assert refused["errors"][0]["field"] == "deadline_seconds"
        assert "30" in refused["detail"] and "1800" in refused["detail"]
    assert problem(await http.post(ws_url(parent), json={"task": ""}), 422)["errors"]
    assert problem(await http.post(ws_url(parent), json={"task": "x", "bogus": 1}), 422)

    unknown = problem(await http.get(ws_url(parent, "ws-999")), 404)
    assert "ws-999" in unknown["detail"]
    for action, body in (
        ("steer", {"command": "add_instruction", "text": "x"}),
        ("messages", {"message": "hello"}),
        ("terminate", None),
    ):
        reply = await http.post(ws_url(parent, "ws-999", action), json=body)
        assert "ws-999" in problem(reply, 404)["detail"], action

    ack = await launch(http, parent, task="Wait for questions.", interactive=True)
    launch_id = ack["launch_id"]
    bad_command = problem(
        await http.post(ws_url(parent, launch_id, "steer"), json={"command": "self_destruct"}),
        422,
    )
    assert bad_command["errors"][0]["field"] == "command"
    assert "add_instruction" in bad_command["detail"]
    no_text = problem(
        await http.post(ws_url(parent, launch_id, "steer"), json={"command": "set_priority"}),
        422,
    )
    assert "text" in no_text["detail"]
    assert (await http.post(ws_url(parent, launch_id, "terminate"))).status_code == 202

    # Nothing of it stopped the run.
    assert (await http.get(f"/runs/{parent['workflow_id']}")).json()["status"] == "paused"


async def test_a_finished_run_takes_no_workstream(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="pipeline", input={"text": "short and done"})
    await wait_for_status(http, run["workflow_id"], {"completed"})
    refused = problem(await http.post(ws_url(run), json={"task": "too late"}), 409)
    assert run["workflow_id"] in refused["detail"]
    listed = await http.get(ws_url(run))
    assert listed.status_code == 200 and listed.json()["workstreams"] == []


async def test_only_the_owner_or_a_run_control_role_may_launch_or_steer(
    stack: SpindleStack, callers: dict[str, Caller], parent: dict[str, Any]
) -> None:
    async with client_for(stack, callers["bob"]) as bob:
        assert (await bob.get(ws_url(parent))).status_code == 200  # he may read it
        refused = await bob.post(ws_url(parent), json={"task": "not mine"})
        assert refused.status_code == 403, refused.text
        steer = await bob.post(ws_url(parent, "ws-1", "steer"), json={"command": "pause_requested"})
        assert steer.status_code == 403
    async with client_for(stack, callers["mallory"]) as mallory:
        assert (await mallory.get(ws_url(parent))).status_code == 404


async def test_routes_are_served_under_the_vertesia_prefix(
    http: httpx.AsyncClient, parent: dict[str, Any]
) -> None:
    listed = await http.get(f"/api/v1/workflows{ws_url(parent)}")
    assert listed.status_code == 200, listed.text
    assert listed.json() == {"workstreams": []}


async def test_cancelling_the_run_cancels_its_workstreams(
    http: httpx.AsyncClient, stack: SpindleStack, parent: dict[str, Any], stream: SseConnection
) -> None:
    ack = await launch(http, parent, task="Keep an eye on costs.", interactive=True)
    launch_id = ack["launch_id"]
    await stream.until(of(launch_id, T.ANSWER), timeout=WAIT)

    cancelled = await http.post(f"/runs/{parent['workflow_id']}/cancel")
    assert cancelled.status_code == 202, cancelled.text

    rest = await stream.read_to_end(timeout=WAIT)
    messages = [e.json() for e in stream.events]
    child_end = [m for m in messages if m.get("w") == launch_id and m["t"] == T.COMPLETE]
    assert [m["d"]["status"] for m in child_end] == ["canceled"]
    report = [m for m in messages if "w" not in m and launch_id in (m.get("m") or "")]
    assert report and report[-1]["d"]["state"] == "canceled"
    assert rest and rest[-1].json()["t"] == T.TERMINATED and "w" not in rest[-1].json()
    # Nothing is orphaned: the child workflow is closed too.
    child = await stack.temporal.get_workflow_handle(ack["child_workflow_id"]).describe()
    assert child.status is not None and child.status.name != "RUNNING"
    # The closed run still lists its workstreams (Temporal answers while a worker is up).
    await wait_for_status(http, parent["workflow_id"], {"canceled"})
    listed = (await http.get(ws_url(parent))).json()["workstreams"]
    assert [(w["launch_id"], w["state"]) for w in listed] == [(launch_id, "canceled")]
    late = await http.post(ws_url(parent), json={"task": "too late"})
    assert parent["workflow_id"] in problem(late, 409)["detail"]


async def test_terminating_the_run_cancels_its_workstreams(
    http: httpx.AsyncClient, stack: SpindleStack, parent: dict[str, Any], stream: SseConnection
) -> None:
    """Children outlive a parent generation (parent close policy ABANDON): a terminate,
    which runs no code in the parent, still ends them, through the gateway."""
    ack = await launch(http, parent, task="Keep an eye on latency.", interactive=True)
    launch_id = ack["launch_id"]
    await stream.until(of(launch_id, T.ANSWER), timeout=WAIT)

    terminated = await http.post(f"/runs/{parent['workflow_id']}/terminate")
    assert terminated.status_code == 202, terminated.text

    rest = await stream.read_to_end(timeout=WAIT)
    assert rest and rest[-1].json()["t"] == T.TERMINATED and "w" not in rest[-1].json()
    # Not orphaned: the gateway cancelled the child, which ended as cancelled.
    child = stack.temporal.get_workflow_handle(ack["child_workflow_id"])
    outcome = await asyncio.wait_for(child.result(), timeout=WAIT)
    assert outcome["launch_id"] == launch_id and outcome["state"] == "canceled"


async def test_terminating_a_run_without_a_worker_still_cancels_its_workstreams(
    http: httpx.AsyncClient, stack: SpindleStack, parent: dict[str, Any]
) -> None:
    """No worker answers the run's workstream query: the gateway finds the children
    in Temporal's visibility (their ParentWorkflowId) and cancels them; they end as
    cancelled once a worker is back."""
    ack = await launch(http, parent, task="Keep an eye on the queues.", interactive=True)
    await until_info(http, parent, ack["launch_id"], phase="blocked")
    stack.kill_worker()
    try:
        terminated = await http.post(f"/runs/{parent['workflow_id']}/terminate")
        assert terminated.status_code == 202, terminated.text
    finally:
        await stack.restart_worker()

    child = stack.temporal.get_workflow_handle(ack["child_workflow_id"])
    outcome = await asyncio.wait_for(child.result(), timeout=WAIT)
    assert outcome["launch_id"] == ack["launch_id"] and outcome["state"] == "canceled"


async def test_a_terminate_from_temporal_itself_also_ends_its_workstreams(
    http: httpx.AsyncClient, stack: SpindleStack, parent: dict[str, Any], stream: SseConnection
) -> None:
    """Terminated outside Spindle (Temporal UI, CLI): the gateway notices the closed run
    (here on GET /runs/{id}) and cancels its open children."""
    ack = await launch(http, parent, task="Keep an eye on errors.", interactive=True)
    await stream.until(of(ack["launch_id"], T.ANSWER), timeout=WAIT)

    await stack.temporal.get_workflow_handle(parent["workflow_id"]).terminate("from the UI")
    await wait_for_status(http, parent["workflow_id"], {"terminated"})

    child = stack.temporal.get_workflow_handle(ack["child_workflow_id"])
    outcome = await asyncio.wait_for(child.result(), timeout=WAIT)
    assert outcome["state"] == "canceled"


async def test_without_a_worker_the_list_is_a_503_and_comes_back(
    http: httpx.AsyncClient, stack: SpindleStack, parent: dict[str, Any]
) -> None:
    ack = await launch(http, parent, task="Wait for questions.", interactive=True)
    await until_info(http, parent, ack["launch_id"], phase="blocked")
    stack.kill_worker()
    try:
        reply = await http.get(ws_url(parent))
        assert "worker" in problem(reply, 503)["detail"]
        assert int(reply.headers["retry-after"]) > 0
    finally:
        await stack.restart_worker()

    async def answered() -> dict[str, Any] | None:
        # The first queries may still go to the dead worker's sticky queue (503).
        reply = await http.get(ws_url(parent, ack["launch_id"]))
        return reply.json() if reply.status_code == 200 else None

    back = await eventually(answered, what="the list answers again", timeout=WAIT, interval=0.2)
    assert (back["state"], back["phase"]) == ("running", "blocked")
