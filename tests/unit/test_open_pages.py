"""The archiver's open pages: which page a batch's entries go on (the MongoDB
side is ``tests/integration/test_archive.py``, the states in Redis
``tests/faults/test_archive_outbox.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import InsertOne, UpdateOne

from spindle.shared.store.open_pages import OpenPages, PageState, PageWrite, message_slot

pytestmark = pytest.mark.unit


def entries(*seqs: int, raw: str = "x") -> list[dict[str, Any]]:
    return [{"seq": seq, "ts": seq, "raw": raw} for seq in seqs]


def page_ids(writes: list[PageWrite]) -> list[str]:
    return [w._filter["_id"] if isinstance(w, UpdateOne) else w._doc["_id"] for w in writes]


def seqs(write: PageWrite) -> list[str]:
    """The seqs a write adds: set on an open page, or inserted with a new one."""
    if isinstance(write, UpdateOne):
        return [name.removeprefix("by_seq.") for name in write._doc["$set"]]
    return list(write._doc["by_seq"])


def test_a_batch_goes_on_the_open_page_its_state_names_until_it_is_full() -> None:
    known = {message_slot("s"): PageState(id="s:page", entries=2, size=2)}
    pages = OpenPages(known, max_entries=3)
    writes = pages.message_writes("s", entries(3, 4))
    assert page_ids(writes)[0] == "s:page" and len(writes) == 2
    assert isinstance(writes[0], UpdateOne) and seqs(writes[0]) == ["3"]
    assert isinstance(writes[1], InsertOne) and seqs(writes[1]) == ["4"]
    assert pages.staged[message_slot("s")].entries == 1
    assert known[message_slot("s")] == PageState(id="s:page", entries=2, size=2), "unchanged"


def test_a_batch_planned_again_opens_pages_of_its_own() -> None:
    first, again = OpenPages(), OpenPages()
    assert page_ids(first.message_writes("s", entries(1))) != page_ids(
        again.message_writes("s", entries(1))
    )


def test_a_message_larger_than_a_page_gets_one_of_its_own() -> None:
    pages = OpenPages(max_bytes=10)
    writes = pages.message_writes("s", [*entries(1, raw="y" * 25), *entries(2, 3)])
    assert len(page_ids(writes)) == 2
    assert [seqs(write) for write in writes] == [["1"], ["2", "3"]]
    assert (writes[1]._doc["first_seq"], writes[1]._doc["last_seq"]) == (2, 3)


def test_a_stream_is_planned_once_a_batch() -> None:
    pages = OpenPages()
    pages.message_writes("s", entries(1))
    with pytest.raises(ValueError, match="m:s"):
        pages.message_writes("s", entries(2))


def test_two_new_report_pages_of_one_batch_have_ids_of_their_own() -> None:
    reports = [{"key": f"w:n:{visit}", "visit": visit} for visit in (1, 2, 3)]
    writes = OpenPages(max_entries=1).report_writes("w", "w", reports)
    assert len(set(page_ids(writes))) == 3


UNREADABLE = [None, b"", b"not json", b'{"id": "p"}', b'{"id":"p","n":"x","b":1}']


@pytest.mark.parametrize("raw", UNREADABLE)
def test_a_state_that_cannot_be_read_is_no_state(raw: bytes | None) -> None:
    assert PageState.loads(raw) is None


def test_a_state_reads_back_as_saved() -> None:
    state = PageState(id="s:000000000001:17", entries=3, size=120)
    assert PageState.loads(state.dumps()) == state
