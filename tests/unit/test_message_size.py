"""Messages larger than the limit are cut to fit, on a UTF-8 boundary, with a marker."""

from __future__ import annotations

import re

import pytest

from spindle.shared.contracts.messages import (
    AgentMessageType,
    create_compact_message,
    cut_to_size,
    parse_message,
    stored_size,
)

pytestmark = pytest.mark.unit

LIMIT = 1024
MARKER = re.compile(r"… \[truncated (\d+) bytes\]$")


def removed_bytes(text: str) -> int:
    found = MARKER.search(text)
    assert found, f"no truncation marker at the end of {text[-60:]!r}"
    return int(found.group(1))


def test_a_message_that_fits_is_returned_unchanged() -> None:
    message = create_compact_message(AgentMessageType.ANSWER, "short", details={"k": 1})
    assert cut_to_size(message, LIMIT) is message


def test_long_ascii_text_is_cut_to_the_limit_and_says_how_much_was_cut() -> None:
    text = "x" * 5000
    message = create_compact_message(AgentMessageType.ANSWER, text, activity_id="draft.1")
    cut = cut_to_size(message, LIMIT)
    assert stored_size(cut) <= LIMIT
    assert stored_size(cut) > LIMIT - 40, "the cut keeps as much text as fits"
    assert cut.m is not None
    kept = MARKER.sub("", cut.m)
    assert text.startswith(kept)
    assert removed_bytes(cut.m) == len(text) - len(kept)
    assert (cut.t, cut.i) == (message.t, message.i)


@pytest.mark.parametrize("char", ["é", "€", "😀", "中"])
def test_multibyte_text_is_cut_on_a_character_boundary(char: str) -> None:
    text = "a" + char * 3000  # offsets every multi-byte character by one byte
    cut = cut_to_size(create_compact_message(AgentMessageType.THOUGHT, text), LIMIT)
    assert stored_size(cut) <= LIMIT
    assert cut.m is not None
    kept = MARKER.sub("", cut.m)
    assert kept == text[: len(kept)], "only whole characters are kept"
    assert removed_bytes(cut.m) == len(text.encode()) - len(kept.encode())
    # What is stored parses back (valid UTF-8 and JSON).
    assert parse_message(cut.to_json()).m == cut.m


def test_text_that_json_escapes_heavily_still_fits() -> None:
    text = '"\\\n\x01' * 2000  # each character takes 2 to 6 bytes in JSON
    cut = cut_to_size(create_compact_message(AgentMessageType.UPDATE, text), LIMIT)
    assert stored_size(cut) <= LIMIT
    assert cut.m is not None
    assert text.startswith(MARKER.sub("", cut.m))


def test_huge_details_are_replaced_by_a_note_of_their_size() -> None:
    details = {"rows": ["y" * 100] * 50}
    message = create_compact_message(AgentMessageType.UPDATE, "the table", details=details)
    cut = cut_to_size(message, LIMIT)
    assert stored_size(cut) <= LIMIT
    assert cut.m == "the table"
    assert cut.d["truncated"] is True
    assert cut.d["bytes"] > LIMIT


def test_huge_text_and_huge_details_both_give_way() -> None:
    message = create_compact_message(
        AgentMessageType.ANSWER, "z" * 4000, details={"blob": "w" * 4000}
    )
    cut = cut_to_size(message, LIMIT)
    assert stored_size(cut) <= LIMIT
    assert cut.d["truncated"] is True
    assert cut.m is not None and cut.m.startswith("zzz")
    assert removed_bytes(cut.m) > 0


def test_stored_size_counts_the_timestamp_redis_adds() -> None:
    without = create_compact_message(AgentMessageType.UPDATE, "hi")
    stamped = create_compact_message(AgentMessageType.UPDATE, "hi", timestamp=1_700_000_000_000)
    assert stored_size(without) == stored_size(stamped) == len(stamped.to_json())
