"""The message formats of seed 002: conversions, parsing, and the size of the wire
format against the UI format."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from spindle.shared.contracts.messages import (
    MAIN_WORKSTREAM,
    AgentMessage,
    AgentMessageType,
    CompactMessage,
    create_compact_message,
    parse_message,
    to_agent_message,
    to_compact_message,
)

pytestmark = pytest.mark.unit

RUN_ID = "0195f3c2-7a1e-7cc0-9a65-3f1f1f6f0a11"
TS = 1_741_000_000_123
DETAILS = {"tool": "search", "args": {"q": "été"}, "items": [1, 2.5, None, True]}


def test_type_values_are_the_wire_contract() -> None:
    assert [(t.name, t.value) for t in AgentMessageType] == [
        ("SYSTEM", 0),
        ("THOUGHT", 1),
        ("PLAN", 2),
        ("UPDATE", 3),
        ("COMPLETE", 4),
        ("WARNING", 5),
        ("ERROR", 6),
        ("ANSWER", 7),
        ("QUESTION", 8),
        ("REQUEST_INPUT", 9),
        ("IDLE", 10),
        ("TERMINATED", 11),
        ("STREAMING_CHUNK", 12),
        ("BATCH_PROGRESS", 13),
        ("RESTARTING", 14),
    ]


def compact_variants(t: AgentMessageType) -> list[CompactMessage]:
    return [
        CompactMessage(t=t),
        CompactMessage(t=t, m="hello", ts=TS),
        CompactMessage(t=t, m="in a child", w="ws-7", ts=TS),
        CompactMessage(t=t, m="with details", d=DETAILS, ts=TS, i="act-3"),
        CompactMessage(t=t, m="chunk", w="ws-7", f=0, ts=TS, i="act-3"),
        CompactMessage(t=t, m="last chunk", f=1, ts=TS, i="act-3"),
    ]


@pytest.mark.parametrize("t", list(AgentMessageType), ids=lambda t: t.name)
def test_compact_to_agent_to_compact_round_trips(t: AgentMessageType) -> None:
    for compact in compact_variants(t):
        agent = to_agent_message(compact, RUN_ID)
        assert agent.type is t
        assert agent.workflow_run_id == RUN_ID
        assert agent.workstream_id == (compact.w or MAIN_WORKSTREAM)
        assert agent.message == (compact.m or "")
        assert agent.details == compact.d
        assert agent.timestamp == (compact.ts or 0)
        assert agent.is_final == (None if compact.f is None else bool(compact.f))
        assert agent.activity_id == compact.i
        assert to_compact_message(agent) == compact


@pytest.mark.parametrize("t", list(AgentMessageType), ids=lambda t: t.name)
def test_agent_to_compact_to_agent_round_trips(t: AgentMessageType) -> None:
    agents = [
        AgentMessage(timestamp=TS, workflow_run_id=RUN_ID, type=t, workstream_id=MAIN_WORKSTREAM),
        AgentMessage(
            timestamp=TS,
            workflow_run_id=RUN_ID,
            type=t,
            message="to the child",
            details=DETAILS,
            workstream_id="ws-7",
        ),
        AgentMessage(
            timestamp=TS,
            workflow_run_id=RUN_ID,
            type=t,
            message="final",
            workstream_id=MAIN_WORKSTREAM,
            is_final=True,
            activity_id="act-1",
        ),
    ]
    for agent in agents:
        compact = to_compact_message(agent)
        assert compact.w is None if agent.workstream_id == MAIN_WORKSTREAM else compact.w == "ws-7"
        assert to_agent_message(compact, RUN_ID) == agent


def test_agent_without_workstream_means_main() -> None:
    agent = AgentMessage(timestamp=TS, workflow_run_id=RUN_ID, type=AgentMessageType.UPDATE)
    compact = to_compact_message(agent)
    assert compact.w is None
    assert to_agent_message(compact, RUN_ID).workstream_id == MAIN_WORKSTREAM


def test_create_compact_message_uses_readable_names() -> None:
    made = create_compact_message(
        AgentMessageType.STREAMING_CHUNK,
        "tok",
        workstream_id="ws-2",
        details={"n": 1},
        final=True,
        timestamp=TS,
        activity_id="a1",
    )
    assert made == CompactMessage(t=12, m="tok", w="ws-2", d={"n": 1}, f=1, ts=TS, i="a1")
    assert create_compact_message(AgentMessageType.ANSWER, workstream_id="main").w is None
    assert create_compact_message(AgentMessageType.ANSWER, final=False).f == 0
    assert create_compact_message(AgentMessageType.ANSWER).f is None


@pytest.mark.parametrize(
    "data",
    [
        '{"t":7,"m":"hi","w":"ws-1","ts":5}',
        b'{"t":7,"m":"hi","w":"ws-1","ts":5}',
        {"t": 7, "m": "hi", "w": "ws-1", "ts": 5},
        '{"type":7,"message":"hi","workstream_id":"ws-1","timestamp":5,"workflow_run_id":"r"}',
        b'{"type":7,"message":"hi","workstream_id":"ws-1","timestamp":5,"workflow_run_id":"r"}',
        {
            "type": 7,
            "message": "hi",
            "workstream_id": "ws-1",
            "timestamp": 5,
            "workflow_run_id": "r",
        },
    ],
    ids=["compact-str", "compact-bytes", "compact-dict", "ui-str", "ui-bytes", "ui-dict"],
)
def test_parse_message_accepts_both_formats(data: str | bytes | dict[str, Any]) -> None:
    assert parse_message(data) == CompactMessage(t=7, m="hi", w="ws-1", ts=5)


def test_parse_message_ignores_unknown_fields() -> None:
    assert parse_message({"t": 3, "zz": 1}) == CompactMessage(t=3)


@pytest.mark.parametrize(
    "junk",
    [
        "not json",
        b"\xff\xfe",
        "[1, 2]",
        "42",
        "null",
        {},
        {"m": "no type"},
        {"t": 99},
        {"t": "seven"},
        {"t": 7, "f": 2},
        {"type": 7},  # readable but missing timestamp and run id
    ],
)
def test_parse_message_rejects_junk_with_value_error(junk: Any) -> None:
    with pytest.raises(ValueError):
        parse_message(junk)


def test_to_wire_omits_nulls_and_main_workstream() -> None:
    assert CompactMessage(t=AgentMessageType.IDLE).to_wire() == {"t": 10}
    assert CompactMessage(t=3, m="x", w=MAIN_WORKSTREAM).to_wire() == {"t": 3, "m": "x"}
    assert CompactMessage(t=3, w="ws-1", f=0, ts=9, i="a").to_wire() == {
        "ts": 9,
        "t": 3,
        "w": "ws-1",
        "f": 0,
        "i": "a",
    }
    assert CompactMessage(t=3, ts=9, m="x").to_json().startswith(b'{"ts":9,')
    assert b"null" not in CompactMessage(t=3, m="x", d={"k": 1}).to_json()


# The fields of seed 002's AgentMessage interface (activity_id / is_final are ours).
SEED_UI_FIELDS = {"timestamp", "workflow_run_id", "type", "message", "details", "workstream_id"}


def ui_json(message: CompactMessage) -> bytes:
    return orjson.dumps(
        to_agent_message(message, RUN_ID).model_dump(mode="json", include=SEED_UI_FIELDS)
    )


def test_compact_json_is_smaller_than_the_ui_json() -> None:
    # A typical agent update: a sentence and small tool details, in a workstream.
    compact = create_compact_message(
        AgentMessageType.UPDATE,
        "Searching the knowledge base for the latest pricing documents",
        workstream_id="research-1",
        details={"tool": "search", "query": "pricing 2025"},
        timestamp=TS,
        activity_id="7f3a2c",
    )
    compact_size = len(compact.to_json())
    ui_size = len(ui_json(compact))
    ratio = compact_size / ui_size
    print(f"\ncompact {compact_size} B vs UI {ui_size} B: ratio {ratio:.2f}")
    assert compact_size < ui_size

    # The small messages that dominate a stream (token chunks) shrink the most.
    chunk = create_compact_message(
        AgentMessageType.STREAMING_CHUNK, " the", timestamp=TS, activity_id="7f3a2c", final=False
    )
    chunk_ui = ui_json(chunk)
    chunk_ratio = len(chunk.to_json()) / len(chunk_ui)
    print(f"chunk compact {len(chunk.to_json())} B vs UI {len(chunk_ui)} B: {chunk_ratio:.2f}")
    assert chunk_ratio < 0.5
