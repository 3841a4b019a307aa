"""Properties of the message formats (spindle.shared.contracts.messages), for any message.

Hypothesis generates messages of every type with any text, workstream, details
(any JSON value), final flag, timestamp and activity id, and checks what a
client relies on: the compact and UI formats convert into each other without
losing anything, the wire JSON is valid JSON that parses back to the same
message, and the numeric type codes never move.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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

FAST = settings(max_examples=100, deadline=None)

# The wire contract of seed 002: name → code, never renumbered.
WIRE_CODES = {
    "SYSTEM": 0,
    "THOUGHT": 1,
    "PLAN": 2,
    "UPDATE": 3,
    "COMPLETE": 4,
    "WARNING": 5,
    "ERROR": 6,
    "ANSWER": 7,
    "QUESTION": 8,
    "REQUEST_INPUT": 9,
    "IDLE": 10,
    "TERMINATED": 11,
    "STREAMING_CHUNK": 12,
    "BATCH_PROGRESS": 13,
    "RESTARTING": 14,
}

# JSON values as a run produces them: 64-bit integers (orjson's range, and what
# JavaScript clients can at least parse), finite floats, any text.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
message_types = st.sampled_from(list(AgentMessageType))
texts = st.text(max_size=200)
ids = st.text(min_size=1, max_size=40)
timestamps = st.integers(min_value=1, max_value=2**53)  # epoch ms a JS client can hold exactly


@st.composite
def compact_messages(draw: st.DrawFn) -> CompactMessage:
    """Any compact message, in the canonical form the server writes.

    Canonical: no empty text, no ``w`` for ``main``, no zero timestamp and no
    ``d`` that is null, because the wire format drops what equals a default.
    """
    return create_compact_message(
        draw(message_types),
        draw(st.none() | texts.filter(bool)),
        workstream_id=draw(st.none() | st.just(MAIN_WORKSTREAM) | ids),
        details=draw(st.none() | json_values.filter(lambda v: v is not None)),
        final=draw(st.none() | st.booleans()),
        timestamp=draw(st.none() | timestamps),
        activity_id=draw(st.none() | ids),
    )


@st.composite
def agent_messages(draw: st.DrawFn) -> AgentMessage:
    """Any UI-format message (``workstream_id`` always set, as the UI reads it)."""
    return AgentMessage(
        timestamp=draw(timestamps),
        workflow_run_id=draw(ids),
        type=draw(message_types),
        message=draw(texts),
        details=draw(json_values),
        workstream_id=draw(st.just(MAIN_WORKSTREAM) | ids),
        activity_id=draw(st.none() | ids),
        is_final=draw(st.none() | st.booleans()),
    )


@FAST
@given(compact_messages(), ids)
def test_compact_to_ui_and_back_loses_nothing(compact: CompactMessage, run_id: str) -> None:
    agent = to_agent_message(compact, run_id)
    assert agent.workflow_run_id == run_id
    assert agent.type is compact.t
    assert agent.workstream_id == compact.workstream
    assert to_compact_message(agent) == compact


@FAST
@given(agent_messages())
def test_ui_to_compact_and_back_loses_nothing(agent: AgentMessage) -> None:
    again = to_agent_message(to_compact_message(agent), agent.workflow_run_id)
    assert again == agent


@FAST
@given(compact_messages())
def test_wire_json_is_valid_json_that_parses_back(compact: CompactMessage) -> None:
    wire = compact.to_json()
    decoded = json.loads(wire.decode("utf-8"))  # any standard JSON parser reads it
    assert decoded == compact.to_wire()
    assert parse_message(wire) == compact
    assert parse_message(wire.decode("utf-8")) == compact
    assert parse_message(decoded) == compact


@FAST
@given(compact_messages())
def test_wire_json_is_the_small_form(compact: CompactMessage) -> None:
    wire = orjson.loads(compact.to_json())
    assert None not in wire.values()
    assert wire.get("w") != MAIN_WORKSTREAM
    assert set(wire) <= {"t", "m", "w", "d", "f", "ts", "i"}
    assert isinstance(wire["t"], int) and not isinstance(wire["t"], bool)


@FAST
@given(agent_messages())
def test_ui_json_parses_to_the_same_wire_message(agent: AgentMessage) -> None:
    assert parse_message(agent.model_dump_json()) == to_compact_message(agent)


@FAST
@given(
    st.dictionaries(st.text(max_size=5), json_values, max_size=6)
    | json_values
    | st.binary(max_size=60)
)
def test_parse_message_refuses_garbage_with_value_error_only(data: Any) -> None:
    """Whatever arrives, parse_message returns a message or raises ValueError."""
    raw = data if isinstance(data, dict | bytes) else orjson.dumps(data)
    try:
        message = parse_message(raw)
    except ValueError:
        return
    assert isinstance(message, CompactMessage)


@FAST
@given(st.integers(min_value=-1000, max_value=1000))
def test_type_codes_are_stable_on_the_wire(code: int) -> None:
    if code in WIRE_CODES.values():
        message = parse_message({"t": code})
        assert int(message.t) == code
        assert message.t.name == next(n for n, v in WIRE_CODES.items() if v == code)
        assert orjson.loads(message.to_json())["t"] == code
    else:
        with pytest.raises(ValueError):
            parse_message({"t": code})


def test_every_type_has_its_contract_code() -> None:
    assert {t.name: t.value for t in AgentMessageType} == WIRE_CODES
    assert {int(t) for t in AgentMessageType} == set(range(len(WIRE_CODES)))
