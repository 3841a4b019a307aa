"""AG-UI 1.0 end to end: ``POST /agui/{graph}`` against the full stack.

Every event the gateway sends is validated with the published ``ag-ui-protocol``
models (PyPI). The run asks a human (an interrupt with its ``responseSchema``),
a refused answer is a 422 naming the field, the valid answer resumes the run on
a new AG-UI run of the same thread, a reconnect with the last event id gets the
rest exactly once, and the published ``@ag-ui/client`` (npm) does the same.
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

from tests.e2e.conftest import Caller
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

    # A refused answer: 422 naming the field, and the run keeps waiting.
    refused = await http.post(
        "/agui/approval-flow",
        json=run_input(
            thread,
            "r2-bad",
            resume=answering(interrupt, {}),
        ),
    )
    assert refused.status_code == 422, refused.text
    assert any("decision" in str(e) for e in refused.json()["errors"]), refused.json()

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
    steps = [e.json()["stepName"] for e in whole if e.json()["type"] == "STEP_STARTED"]
    assert steps[:1] == ["review"] and "publish" in steps and "revise" not in steps
    # The interrupt is closed: answering it again on a new AG-UI run is a conflict.
    again = await http.post(
        "/agui/approval-flow",
        json=run_input(thread, "r3", resume=answering(interrupt, {"decision": "reject"})),
    )
    assert again.status_code == 409, again.text


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
    assert (await mallory.post("/agui/approval-flow", json=answer)).status_code == 404
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
    assert bodies[-1]["type"] == "RUN_FINISHED" and bodies[-1]["result"]["state"] == "completed"
