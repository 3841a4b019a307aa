"""The AG-UI mapping of a run's messages (gateway/protocols/agui/event_mapper.py).

Every event is validated with the published ``ag-ui-protocol`` models, and every
segment against AG-UI's ordering rules (what is started is finished before the
run ends; nothing follows the run's end; subagent events only while it runs).
"""

from __future__ import annotations

from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from spindle.gateway.protocols.agui.event_mapper import (
    AguiEvent,
    SegmentEnd,
    SegmentMapper,
    interrupt_id,
    interrupt_seq,
    parse_event_id,
)
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import CompactMessage

pytestmark = pytest.mark.unit

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
SCHEMA = {"type": "object", "properties": {"decision": {"type": "string"}}}


def msg(t: T, m: str | None = None, **fields: Any) -> CompactMessage:
    return CompactMessage(t=t, m=m, **fields)


def segment(
    messages: list[CompactMessage], *, start: int = 0, result: Any = None
) -> tuple[SegmentMapper, list[AguiEvent]]:
    mapper = SegmentMapper(thread_id="th", run_id="r1", workflow_id="wf", start_seq=start)
    events = mapper.opening()
    for seq, message in enumerate(messages, start=start + 1):
        events += mapper.feed(seq, message)
        if mapper.end is not None:
            events += mapper.finish(result)
            break
    return mapper, events


def check_rules(events: list[AguiEvent]) -> None:
    """AG-UI's sequencing rules, as a consumer checks them."""
    open_texts: set[str] = set()
    open_calls: set[str] = set()
    open_steps: set[str] = set()
    subagents: set[str] = set()
    ended = False
    for event in events:
        body = event.body
        EVENTS.validate_python(body)
        kind = body["type"]
        assert not ended, f"{kind} after the run ended"
        owner = body.get("subagentRunId")
        if owner is not None and kind != "SUBAGENT_STARTED":
            assert owner in subagents, f"{kind} for subagent {owner} that is not running"
        if kind == "TEXT_MESSAGE_START":
            assert body["messageId"] not in open_texts
            open_texts.add(body["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert body["messageId"] in open_texts
            if kind == "TEXT_MESSAGE_END":
                open_texts.remove(body["messageId"])
        elif kind == "TOOL_CALL_START":
            open_calls.add(body["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert body["toolCallId"] in open_calls
            if kind == "TOOL_CALL_END":
                open_calls.remove(body["toolCallId"])
        elif kind == "STEP_STARTED":
            assert body["stepName"] not in open_steps
            open_steps.add(body["stepName"])
        elif kind == "STEP_FINISHED":
            open_steps.remove(body["stepName"])
        elif kind == "SUBAGENT_STARTED":
            subagents.add(body["subagentRunId"])
        elif kind in ("SUBAGENT_FINISHED", "SUBAGENT_ERROR"):
            subagents.remove(body["subagentRunId"])
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            assert not (open_texts or open_calls or open_steps or subagents), kind
            ended = True
    assert ended, "the segment never ended"
    ids = [(e.seq, e.index) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_streamed_answer_tool_calls_and_results() -> None:
    calls = [{"id": "c1", "name": "calculator", "arguments": {"expression": "45 * 12"}}]
    messages = [
        msg(T.STREAMING_CHUNK, "Let me ", i="a.t1", d={"node_id": "agent"}),
        msg(T.STREAMING_CHUNK, "compute.", i="a.t1"),
        msg(T.THOUGHT, "Let me compute.", i="a.t1", d={"node_id": "agent", "tool_calls": calls}),
        msg(T.UPDATE, "Using tool calculator", d={"node_id": "agent", "call_id": "c1"}),
        msg(T.UPDATE, "Tool calculator returned", d={"call_id": "c1", "result": "540"}),
        msg(T.ANSWER, "540", i="a.t2", d={"node_id": "agent"}),
        msg(T.ANSWER, "540", d={"node_id": "out"}),
        msg(T.COMPLETE, "540", d={"status": "completed"}),
    ]
    mapper, events = segment(messages, result={"answer": 540})
    check_rules(events)
    assert mapper.end == SegmentEnd.COMPLETED
    bodies = [e.body for e in events]
    texts = [b for b in bodies if b["type"] == "TEXT_MESSAGE_CONTENT"]
    assert [t["delta"] for t in texts] == ["Let me ", "compute.", "540", "540"]
    start = next(b for b in bodies if b["type"] == "TOOL_CALL_START")
    assert start["parentMessageId"] == texts[0]["messageId"]
    args = next(b for b in bodies if b["type"] == "TOOL_CALL_ARGS")
    assert args["delta"] == '{"expression":"45 * 12"}'
    result = next(b for b in bodies if b["type"] == "TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"]) == ("c1", "540")
    steps = [(b["type"], b["stepName"]) for b in bodies if "stepName" in b]
    assert steps == [
        ("STEP_STARTED", "agent"),
        ("STEP_FINISHED", "agent"),
        ("STEP_STARTED", "out"),
        ("STEP_FINISHED", "out"),
    ]
    assert bodies[-1] == {
        "type": "RUN_FINISHED",
        "threadId": "th",
        "runId": "r1",
        "outcome": {"type": "success"},
        "result": {"answer": 540},
    }


def test_prompt_is_an_interrupt_and_the_resume_segment_starts_after_it() -> None:
    details = {
        "node_id": "review",
        "ui_schema": SCHEMA,
        "prompt": "Approve?",
        "expires_at": "2026-11-26T10:00:00+00:00",
        "assignees": ["alice"],
    }
    prompt = msg(T.REQUEST_INPUT, "Approve?", d=details)
    before = [msg(T.UPDATE, "Calling tool draft", d={"node_id": "draft"}), prompt]
    mapper, events = segment(before)
    check_rules(events)
    assert mapper.end == SegmentEnd.INTERRUPT
    outcome = events[-1].body["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    assert interrupt["id"] == interrupt_id(2) and interrupt_seq(interrupt["id"]) == 2
    assert interrupt["responseSchema"] == SCHEMA and interrupt["message"] == "Approve?"
    assert interrupt["metadata"]["nodeId"] == "review"
    assert interrupt["expiresAt"] == "2026-11-26T10:00:00+00:00"
    assert interrupt["metadata"]["assignees"] == ["alice"]
    # The resume's segment: the echoed answer closes the prompt's step.
    after = [
        msg(T.QUESTION, '{"decision":"approve"}', d={"node_id": "review"}),
        msg(T.COMPLETE, "done", d={"status": "completed"}),
    ]
    resumed, events = segment(after, start=2)
    check_rules(events)
    assert events[0].id == "2.0" and events[0].body["type"] == "RUN_STARTED"
    assert resumed.end == SegmentEnd.COMPLETED


def test_workstream_activity_is_attributed_to_its_subagent() -> None:
    messages = [
        msg(T.UPDATE, "Launching ws-1", d={"node_id": "research"}),
        msg(T.THOUGHT, "Searching", w="ws-1", i="ws.t1", d={"node_id": "agent"}),
        msg(T.STREAMING_CHUNK, "Found", w="ws-1", i="ws.t2"),
        msg(T.ERROR, "a tool failed", w="ws-1"),
        msg(T.COMPLETE, "Found it", w="ws-1", d={"launch_id": "ws-1", "status": "completed"}),
        msg(T.UPDATE, "late note", w="ws-1"),
        msg(T.COMPLETE, "Run completed", d={"status": "completed"}),
    ]
    _, events = segment(messages)
    check_rules(events)
    bodies = [e.body for e in events]
    started = next(b for b in bodies if b["type"] == "SUBAGENT_STARTED")
    assert started["subagentRunId"] == "ws-1"
    child = [b for b in bodies if b.get("subagentRunId") == "ws-1"]
    kinds = [b["type"] for b in child]
    assert kinds[0] == "SUBAGENT_STARTED" and kinds[-1] == "SUBAGENT_FINISHED"
    assert "STEP_STARTED" in kinds and "CUSTOM" in kinds  # its node, its ERROR note
    assert next(b for b in child if b["type"] == "STEP_STARTED")["stepName"] == "ws-1/agent"
    late = [b for b in bodies if b["type"] == "CUSTOM" and b["value"].get("text") == "late note"]
    assert late and "subagentRunId" not in late[0] and late[0]["value"]["workstream"] == "ws-1"


def test_failed_workstream_is_a_subagent_error_and_a_failed_run_is_run_error() -> None:
    messages = [
        msg(T.THOUGHT, "Working", w="ws-2"),
        msg(T.COMPLETE, "Workstream ws-2 failed: boom", w="ws-2", d={"status": "failed"}),
        msg(T.ERROR, "node x failed", d={"error": "node x failed"}),
        msg(T.COMPLETE, "Run failed", d={"status": "failed"}),
    ]
    mapper, events = segment(messages)
    check_rules(events)
    kinds = [e.body["type"] for e in events]
    assert "SUBAGENT_ERROR" in kinds and "SUBAGENT_FINISHED" not in kinds
    assert mapper.end == SegmentEnd.FAILED
    error = {"type": "RUN_ERROR", "message": "node x failed", "code": "RUN_FAILED"}
    assert events[-1].body == error


def test_terminated_run_is_cancelled_and_closes_what_is_open() -> None:
    messages = [
        msg(T.STREAMING_CHUNK, "Half a", i="a.t1", d={"node_id": "agent"}),
        msg(T.THOUGHT, "child", w="ws-3"),
        msg(T.TERMINATED, "Run canceled", d={"status": "canceled"}),
    ]
    _, events = segment(messages)
    check_rules(events)
    assert events[-1].body["outcome"] == {"type": "cancelled"}
    finished = next(e.body for e in events if e.body["type"] == "SUBAGENT_FINISHED")
    assert finished["outcome"] == {"type": "success"}


def test_mapping_is_deterministic_so_a_cursor_resumes_exactly_once() -> None:
    messages = [
        msg(T.STREAMING_CHUNK, "a", i="x", d={"node_id": "n"}),
        msg(T.ANSWER, "a", i="x", d={"node_id": "n"}),
        msg(T.COMPLETE, "ok", d={"status": "completed"}),
    ]
    _, whole = segment(messages)
    for cut in range(len(whole)):
        cursor = parse_event_id(whole[cut].id)
        _, again = segment(messages)
        rest = [e for e in again if e.after(cursor)]
        assert whole[: cut + 1] + rest == whole


@pytest.mark.parametrize("value", ["", "3", "3.", ".1", "a.1", "3.1.2", "-1.0"])
def test_event_ids_that_are_not_ours_are_refused(value: str) -> None:
    assert parse_event_id(value) is None


def test_event_id_parsing() -> None:
    assert parse_event_id(" 12.3 ") == (12, 3)
    assert interrupt_seq("prompt-x") is None and interrupt_seq("other-3") is None


def test_the_interrupt_boundary_sends_state_and_messages_snapshots() -> None:
    sent = [{"id": "u1", "role": "user", "content": "Q3 budget"}]
    mapper = SegmentMapper(thread_id="th", run_id="r1", workflow_id="wf", start_seq=0, sent=sent)
    calls = [{"id": "c1", "name": "calculator", "arguments": {"expression": "1+1"}}]
    messages = [
        msg(T.THOUGHT, "Let me add.", i="a.1.t1", d={"node_id": "a", "tool_calls": calls}),
        msg(T.UPDATE, "ran", d={"node_id": "a", "call_id": "c1", "result": "2"}),
        msg(T.REQUEST_INPUT, "Approve?", d={"node_id": "review", "ui_schema": SCHEMA}),
    ]
    events = mapper.opening()
    for seq, message in enumerate(messages, start=1):
        events += mapper.feed(seq, message)
    events += mapper.finish()
    check_rules(events)
    state, snapshot, finished = (e.body for e in events[-3:])
    assert (state["type"], snapshot["type"]) == ("STATE_SNAPSHOT", "MESSAGES_SNAPSHOT")
    assert finished["outcome"]["type"] == "interrupt"
    assert state["snapshot"]["status"] == "input_required"
    assert state["snapshot"]["steps"] == {
        "a": {"status": "finished"},
        "review": {"status": "finished"},
    }
    assert state["snapshot"]["pendingInput"] == {"interruptId": interrupt_id(3)}
    user, assistant, tool = snapshot["messages"]
    assert user == sent[0]
    assert assistant["role"] == "assistant" and assistant["content"] == "Let me add."
    assert assistant["toolCalls"][0]["function"] == {
        "name": "calculator",
        "arguments": '{"expression":"1+1"}',
    }
    assert (tool["role"], tool["toolCallId"], tool["content"]) == ("tool", "c1", "2")


def test_an_idle_agent_ends_the_agui_run_after_the_message_it_was_sent() -> None:
    idle = msg(T.IDLE, "waiting for your message", d={"node_id": "chat", "waiting_for": []})
    children = msg(T.IDLE, "waiting for ws-1", d={"node_id": "chat", "waiting_for": ["ws-1"]})
    # A first AG-UI run: the agent's answer, then IDLE for the user.
    mapper, events = segment([msg(T.ANSWER, "42", d={"node_id": "chat"}), children, idle])
    check_rules(events)
    assert mapper.end == SegmentEnd.IDLE and len(events) > 3
    assert events[-1].body == {
        "type": "RUN_FINISHED",
        "threadId": "th",
        "runId": "r1",
        "outcome": {"type": "success"},
    }
    # An AG-UI run that sent a message: an IDLE before its echo does not end it.
    mapper = SegmentMapper(
        thread_id="th", run_id="r2", workflow_id="wf", start_seq=10, awaits="agui-r2"
    )
    later = [
        msg(T.ANSWER, "earlier answer", d={"node_id": "chat"}),
        idle,
        msg(T.QUESTION, "and 2 + 3", d={"node_id": "chat", "client_message_id": "agui-r2"}),
        msg(T.ANSWER, "5", d={"node_id": "chat"}),
        idle,
    ]
    events = mapper.opening()
    for seq, message in enumerate(later, start=11):
        events += mapper.feed(seq, message)
        if mapper.end is not None:
            events += mapper.finish()
            break
    check_rules(events)
    assert mapper.end == SegmentEnd.IDLE and events[-1].seq == 15
    texts = [e.body["delta"] for e in events if e.body["type"] == "TEXT_MESSAGE_CONTENT"]
    assert texts == ["earlier answer", "5"]
