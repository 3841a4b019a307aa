"""AG-UI 1.0 end to end: ``POST /agui/{graph}`` against the full stack.

Every event the gateway sends is validated with the published ``ag-ui-protocol``
models (PyPI). The run asks a human (an interrupt with its ``responseSchema``,
after STATE_SNAPSHOT and MESSAGES_SNAPSHOT), a refused answer is a RUN_ERROR
naming the field, the valid answer resumes the run on a new AG-UI run of the same
thread, a reconnect with the last event id gets the rest exactly once, and the
published ``@ag-ui/client`` (npm) does the same. The interrupt rules of AG-UI's
concepts pages: input without ``resume`` on a pending interrupt, an unknown or
stale interrupt are RUN_ERRORs with a code and start nothing; a ``cancelled``
resume takes the prompt's ``on_cancel``; a user message to an idle interactive
agent is a new AG-UI run that ends at its next IDLE.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import Event, RunAgentInput
from pydantic import TypeAdapter

from tests.e2e.conftest import Caller, example_graph
from tests.e2e.sse_client import SseConnection, SseEvent, StreamEnded

pytestmark = [pytest.mark.e2e]

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
NPM_DIR = Path(__file__).resolve().parent.parent / "npm"
SCRIPT = NPM_DIR / "agui_run.mjs"


def run_input(thread: str, run: str, text: str = "", **extra: Any) -> dict[str, Any]:
    body = {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"{run}-m", "role": "user", "content": text}] if text else [],
        **extra,
    }
    RunAgentInput.model_validate(body)  # what we send is a valid RunAgentInput
    return body


async def agui_events(
    http: httpx.AsyncClient,
    graph: str,
    body: dict[str, Any],
    *,
    last_event_id: str | None = None,
    stop_after: int | None = None,
) -> list[SseEvent]:
    """The events of one POST (at most ``stop_after``), each validated by ag-ui-protocol."""
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    events: list[SseEvent] = []
    async with http.stream("POST", f"/agui/{graph}", json=body, headers=headers) as response:
        assert response.status_code == 200, (await response.aread()).decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        connection = SseConnection(response)
        while stop_after is None or len(events) < stop_after:
            try:
                event = await connection.next_event(timeout=60)
            except StreamEnded:
                break
            EVENTS.validate_python(event.json())
            events.append(event)
    return events


def types(events: list[SseEvent]) -> list[str]:
    return [e.json()["type"] for e in events]


def answering(interrupt: dict[str, Any], payload: Any) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


def the_error(events: list[SseEvent], code: str) -> dict[str, Any]:
    """The one RUN_ERROR a refused input streams, with its ``code``."""
    assert types(events) == ["RUN_ERROR"], types(events)
    error = events[0].json()
    assert error["code"] == code, error
    return dict(error)


async def runs_of(http: httpx.AsyncClient, graph: str) -> int:
    listed = await http.get("/runs", params={"graph": graph, "limit": 1})
    assert listed.status_code == 200, listed.text
    return int(listed.json()["total"])


def the_interrupt(events: list[SseEvent]) -> dict[str, Any]:
    finished = events[-1].json()
    assert finished["type"] == "RUN_FINISHED", finished
    assert finished["outcome"]["type"] == "interrupt"
    (interrupt,) = finished["outcome"]["interrupts"]
    return dict(interrupt)


async def test_agui_run_interrupt_resume_and_reconnect(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    thread = f"thread-{unique}"
    first = await agui_events(http, "approval-flow", run_input(thread, "r1", "durable agents"))
    kinds = types(first)
    assert kinds[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"]
    assert first[0].json()["threadId"] == thread and first[0].json()["runId"] == "r1"
    # The draft tool node, then the prompt node, each a step; both finished by the end.
    steps = [(e.json()["type"], e.json()["stepName"]) for e in first if "stepName" in e.json()]
    assert ("STEP_STARTED", "draft") in steps and ("STEP_FINISHED", "review") in steps
    interrupt = the_interrupt(first)
    assert interrupt["responseSchema"]["required"] == ["decision"]
    assert interrupt["message"].startswith("Approve or reject")
    ids = [e.id for e in first]
    assert len(set(ids)) == len(ids)
    # At the interrupt boundary: the state and the thread's messages, then RUN_FINISHED.
    state, messages = first[-3].json(), first[-2].json()
    assert (state["type"], messages["type"]) == ("STATE_SNAPSHOT", "MESSAGES_SNAPSHOT")
    assert state["snapshot"]["status"] == "input_required"
    assert state["snapshot"]["pendingInput"] == {"interruptId": interrupt["id"]}
    assert state["snapshot"]["steps"]["draft"] == {"status": "finished"}
    sent = messages["messages"][0]
    assert (sent["id"], sent["role"], sent["content"]) == ("r1-m", "user", "durable agents")

    # A refused answer: a RUN_ERROR naming the field, and the run keeps waiting.
    refused = await agui_events(
        http, "approval-flow", run_input(thread, "r2-bad", resume=answering(interrupt, {}))
    )
    error = the_error(refused, "INVALID_RESUME")
    assert error["metadata"]["interruptId"] == interrupt["id"]
    assert any("decision" in e["field"] for e in error["metadata"]["errors"]), error

    # The answer resumes the run: cut after a few events, then reconnect.
    resume = run_input(
        thread,
        "r2",
        resume=answering(interrupt, {"decision": "approve"}),
    )
    head = await agui_events(http, "approval-flow", resume, stop_after=4)
    rest = await agui_events(http, "approval-flow", resume, last_event_id=head[-1].id)
    whole = await agui_events(http, "approval-flow", resume, last_event_id=None)
    assert [e.id for e in head + rest] == [e.id for e in whole]  # exactly once, in order
    assert [e.data for e in head + rest] == [e.data for e in whole]
    kinds = types(whole)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    finished = whole[-1].json()
    assert finished["outcome"] == {"type": "success"}
    assert finished["result"]["decision"] == "approve"
    assert "TEXT_MESSAGE_CONTENT" in kinds  # the output node's answer
    started = [e.json()["stepName"] for e in whole if e.json()["type"] == "STEP_STARTED"]
    assert started[:1] == ["review"] and "publish" in started and "revise" not in started
    # The interrupt is closed: answering it again on a new AG-UI run is a stale resume.
    again = await agui_events(
        http,
        "approval-flow",
        run_input(thread, "r3", resume=answering(interrupt, {"decision": "reject"})),
    )
    assert "answered" in the_error(again, "UNKNOWN_INTERRUPT")["message"]


async def test_agui_agent_tool_calls_and_streamed_text(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    events = await agui_events(
        http,
        "research-agent",
        run_input(f"t-{unique}", "r1", "How much is the team plan for 12 seats? 45 * 12"),
    )
    kinds = types(events)
    assert kinds[-1] == "RUN_FINISHED"
    starts = [e.json() for e in events if e.json()["type"] == "TOOL_CALL_START"]
    assert starts and all(s["toolCallName"] in ("search_notes", "calculator") for s in starts)
    text_ids = {e.json()["messageId"] for e in events if e.json()["type"] == "TEXT_MESSAGE_START"}
    assert all(s["parentMessageId"] in text_ids for s in starts)
    assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END")
    results = {e.json()["toolCallId"]: e.json() for e in events if "content" in e.json()}
    assert set(results) == {s["toolCallId"] for s in starts}  # each call gets its result
    calculator = next(s["toolCallId"] for s in starts if s["toolCallName"] == "calculator")
    assert results[calculator]["content"] == "540"
    assert "540" in str(events[-1].json()["result"])


async def test_agui_errors_and_tenants(
    clients: dict[str, httpx.AsyncClient], examples: list[str], unique: str
) -> None:
    alice, bob, mallory = clients["alice"], clients["bob"], clients["mallory"]
    assert (await clients["anonymous"].post("/agui/approval-flow", json={})).status_code == 401
    missing = await alice.post("/agui/approval-flow", json={"runId": "r"})
    assert missing.status_code == 422 and "threadId" in missing.text
    unknown = await alice.post("/agui/no-such-graph", json=run_input(f"t-{unique}", "r", "x"))
    assert unknown.status_code == 404
    thread = f"t-{unique}-iso"
    first = await agui_events(alice, "approval-flow", run_input(thread, "r1", "isolation"))
    interrupt = the_interrupt(first)
    answer = run_input(
        thread,
        "r2",
        resume=answering(interrupt, {"decision": "reject"}),
    )
    # Another tenant's thread is unknown: neither its run nor its events.
    the_error(await agui_events(mallory, "approval-flow", answer), "UNKNOWN_INTERRUPT")
    reconnect = await mallory.post(
        "/agui/approval-flow", json=run_input(thread, "r1"), headers={"last-event-id": "0.0"}
    )
    assert reconnect.status_code == 404
    # bob (same tenant, no role) may not answer alice's prompt, as over REST.
    assert (await bob.post("/agui/approval-flow", json=answer)).status_code == 403
    bad_id = await alice.post(
        "/agui/approval-flow", json=run_input(thread, "r1"), headers={"last-event-id": "x"}
    )
    assert bad_id.status_code == 400 and "Last-Event-ID" in bad_id.text
    done = await agui_events(alice, "approval-flow", answer)
    assert done[-1].json()["result"]["decision"] == "reject"


@pytest.fixture(scope="module")
def agui_client() -> Path:
    if shutil.which("node") is None or not (NPM_DIR / "node_modules/@ag-ui/client").exists():
        pytest.fail("node and tests/npm/node_modules are required: run `npm ci` in tests/npm")
    return SCRIPT


async def test_published_agui_client_runs_and_answers(
    agui_client: Path,
    http: httpx.AsyncClient,
    examples: list[str],
    callers: dict[str, Caller],
    stack: Any,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(agui_client),
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AGUI_URL": f"{stack.base_url}/agui/approval-flow",
            "TOKEN": callers["alice"].key,
            "TOPIC": "published client",
            "DECISION": "approve",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(NPM_DIR),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    first, second = report["runs"]
    assert first["events"][0] == "RUN_STARTED" and first["events"][-1] == "RUN_FINISHED"
    (interrupt,) = first["interrupts"]
    assert interrupt["responseSchema"]["properties"]["decision"]["enum"] == ["approve", "reject"]
    assert second["events"][-1] == "RUN_FINISHED" and second["interrupts"] == []
    assert second["result"]["decision"] == "approve"
    assert "STEP_STARTED" in second["events"] and "TEXT_MESSAGE_CONTENT" in second["events"]
    assert report["errors"] == []


async def test_published_agui_client_meets_the_interrupt_rules(
    agui_client: Path,
    http: httpx.AsyncClient,
    examples: list[str],
    callers: dict[str, Caller],
    stack: Any,
) -> None:
    script = agui_client.parent / "agui_rules.mjs"
    proc = await asyncio.create_subprocess_exec(
        "node",
        str(script),
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AGUI_URL": f"{stack.base_url}/agui/approval-flow",
            "TOKEN": callers["alice"].key,
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(NPM_DIR),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()
    report = json.loads(out.decode().strip().splitlines()[-1])
    first, pending, unknown, cancelled = report["runs"]
    assert first["outcome"] == "interrupt" and first["errors"] == []
    assert first["events"][-3:] == ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    for refused, code in ((pending, "INTERRUPT_PENDING"), (unknown, "UNKNOWN_INTERRUPT")):
        assert refused["events"] == ["RUN_ERROR"], refused
        assert [e["code"] for e in refused["errors"]] == [code]
    assert cancelled["events"][0] == "RUN_STARTED" and cancelled["outcome"] == "cancelled"
    assert cancelled["errors"] == []


async def test_workstream_activity_is_attributed_to_its_subagent(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    events = await agui_events(http, "delegation", run_input(f"t-{unique}", "r1", "durable agents"))
    bodies = [e.json() for e in events]
    started = [b for b in bodies if b["type"] == "SUBAGENT_STARTED"]
    assert [b["subagentRunId"] for b in started] == ["ws-1"]
    child = [b["type"] for b in bodies if b.get("subagentRunId") == "ws-1"]
    assert child[0] == "SUBAGENT_STARTED" and child[-1] == "SUBAGENT_FINISHED"
    assert len(child) > 2  # the child's own work, attributed to it
    assert bodies[-1]["type"] == "RUN_FINISHED"
    # The lead heard its child's result and answered from it.
    assert "Workstream ws-1 completed" in bodies[-1]["result"]["answer"]


async def test_another_user_cannot_rebind_a_thread(
    clients: dict[str, httpx.AsyncClient], examples: list[str], unique: str
) -> None:
    # Issue 28 (low): any user of the tenant could rebind another's thread to a run of theirs.
    alice, bob, carol = clients["alice"], clients["bob"], clients["carol"]
    thread = f"t-{unique}-owned"
    first = await agui_events(alice, "approval-flow", run_input(thread, "r1", "mine"))
    interrupt = the_interrupt(first)
    taken = await bob.post("/agui/approval-flow", json=run_input(thread, "r-bob", "his now"))
    assert taken.status_code == 403, taken.text
    assert "owner" in taken.json()["detail"]
    # The thread still stands for alice's run: her answer resumes it.
    answer = run_input(thread, "r2", resume=answering(interrupt, {"decision": "approve"}))
    done = await agui_events(alice, "approval-flow", answer)
    assert done[-1].json()["result"]["decision"] == "approve"
    # A run-control role may rebind it (as it may control alice's run).
    again = await agui_events(
        carol, "approval-flow", run_input(thread, "r3", "admin's"), stop_after=1
    )
    assert types(again) == ["RUN_STARTED"]


async def test_input_without_resume_on_a_pending_interrupt_is_a_run_error(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    # AG-UI interrupts, rule 4: pending interrupts block new input (RUN_ERROR, nothing starts).
    thread = f"t-{unique}-pending"
    interrupt = the_interrupt(
        await agui_events(http, "approval-flow", run_input(thread, "r1", "first"))
    )
    before = await runs_of(http, "approval-flow")
    blocked = await agui_events(http, "approval-flow", run_input(thread, "r2", "another topic"))
    error = the_error(blocked, "INTERRUPT_PENDING")
    assert error["metadata"]["nodeId"] == "review"
    assert await runs_of(http, "approval-flow") == before  # nothing started
    # Unknown interrupts (never raised, not ours) are RUN_ERRORs too; the run keeps waiting.
    for name in ("prompt-999999", "not-ours"):
        unknown = run_input(thread, f"r-{name}", resume=answering({"id": name}, {}))
        the_error(await agui_events(http, "approval-flow", unknown), "UNKNOWN_INTERRUPT")
    # The refused AG-UI run id is free again, and the interrupt is still open.
    answer = run_input(thread, "r2", resume=answering(interrupt, {"decision": "approve"}))
    done = await agui_events(http, "approval-flow", answer)
    assert done[-1].json()["result"]["decision"] == "approve"


async def test_a_resume_names_the_threads_open_interrupt_and_all_of_them(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    # AG-UI interrupts, rules 1-3: the same thread, an interrupt of the interrupted run,
    # every open interrupt in one resume (Spindle opens one per AG-UI run).
    thread = f"t-{unique}-rules"
    interrupt = the_interrupt(
        await agui_events(http, "approval-flow", run_input(thread, "r1", "rules"))
    )
    approve = answering(interrupt, {"decision": "approve"})
    elsewhere = run_input(f"{thread}-other", "r2", resume=approve)  # rule 1: another thread
    the_error(await agui_events(http, "approval-flow", elsewhere), "UNKNOWN_INTERRUPT")
    extra = approve + answering({"id": "prompt-999999"}, {})  # rule 2/3: one entry too many
    the_error(
        await agui_events(http, "approval-flow", run_input(thread, "r3", resume=extra)),
        "UNKNOWN_INTERRUPT",
    )
    empty = run_input(thread, "r4", "go on", resume=[])  # rule 3/4: nothing addressed
    the_error(await agui_events(http, "approval-flow", empty), "INTERRUPT_PENDING")
    done = await agui_events(http, "approval-flow", run_input(thread, "r5", resume=approve))
    assert done[-1].json()["result"]["decision"] == "approve"  # the refusals changed nothing


async def test_a_cancelled_resume_cancels_the_run_by_default(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    thread = f"t-{unique}-cancel"
    first = await agui_events(http, "approval-flow", run_input(thread, "r1", "abandoned"))
    interrupt = the_interrupt(first)
    workflow_id = first[1].json()["snapshot"]["workflowId"]
    cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    events = await agui_events(http, "approval-flow", run_input(thread, "r2", resume=cancel))
    assert types(events)[0] == "RUN_STARTED"
    assert events[-1].json()["outcome"] == {"type": "cancelled"}
    run = (await http.get(f"/runs/{workflow_id}")).json()
    assert run["status"] == "canceled", run


async def test_a_cancelled_resume_keeps_waiting_when_the_prompt_says_so(
    http: httpx.AsyncClient, unique: str
) -> None:
    spec = example_graph("approval-flow")
    spec["name"] = f"agui-keep-{unique}"
    for node in spec["nodes"]:
        if node["id"] == "review":
            node["params"]["on_cancel"] = "keep_waiting"
    put = await http.put(f"/graphs/{spec['name']}", json=spec)
    assert put.status_code in (200, 201), put.text
    thread = f"t-{unique}-keep"
    interrupt = the_interrupt(
        await agui_events(http, spec["name"], run_input(thread, "r1", "kept"))
    )
    cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
    again = await agui_events(http, spec["name"], run_input(thread, "r2", resume=cancel))
    assert the_interrupt(again)["id"] == interrupt["id"]  # asked again, the run unchanged
    answer = run_input(thread, "r3", resume=answering(interrupt, {"decision": "approve"}))
    done = await agui_events(http, spec["name"], answer)
    assert done[-1].json()["result"]["decision"] == "approve"


async def test_user_messages_to_an_idle_agent_are_new_agui_runs(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    # docs/conversations.md: an interactive agent posts IDLE after each answer.
    thread = f"t-{unique}-chat"
    first = await agui_events(http, "chat", run_input(thread, "r1", "what is 6 * 7"))
    assert types(first)[0] == "RUN_STARTED" and "TEXT_MESSAGE_CONTENT" in types(first)
    assert first[-1].json()["outcome"] == {"type": "success"}  # ended at the agent's IDLE
    workflow_id = first[1].json()["snapshot"]["workflowId"]
    # No new user message for the live run: RUN_BUSY, nothing sent or started.
    the_error(await agui_events(http, "chat", run_input(thread, "r2")), "RUN_BUSY")
    follow_up = {
        "threadId": thread,
        "runId": "r3",
        "messages": [
            {"id": "r1-m", "role": "user", "content": "what is 6 * 7"},
            {"id": "r3-m", "role": "user", "content": "and 2 + 3"},
        ],
    }
    second = await agui_events(http, "chat", follow_up)
    kinds = types(second)
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED", kinds
    assert second[-1].json()["outcome"] == {"type": "success"}
    echoes = [
        e.json()["value"]
        for e in second
        if e.json()["type"] == "CUSTOM" and e.json()["name"] == "spindle.question"
    ]
    assert [v["text"] for v in echoes] == ["and 2 + 3"]
    assert echoes[0]["details"]["client_message_id"] == "agui-r3"
    assert "TEXT_MESSAGE_CONTENT" in kinds  # the agent's answer to it
    run = (await http.get(f"/runs/{workflow_id}")).json()
    assert run["status"] == "running"  # the same conversation, still open
    assert (await http.post(f"/runs/{workflow_id}/complete")).status_code == 200
