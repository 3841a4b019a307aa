"""The archiver's open pages: which page a batch's entries go on (the MongoDB
side is ``tests/integration/test_archive.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import UpdateOne

from spindle.shared.store.open_pages import OpenPages

pytestmark = pytest.mark.unit


def entries(*seqs: int, raw: str = "x") -> list[dict[str, Any]]:
    return [{"seq": seq, "ts": seq, "raw": raw} for seq in seqs]


def page_ids(writes: list[UpdateOne]) -> list[str]:
    return [write._filter["_id"] for write in writes]


def test_a_stream_written_least_recently_loses_its_open_page_first() -> None:
    pages = OpenPages(max_open=2)
    first = {s: page_ids(pages.message_writes(s, entries(1))) for s in ("a", "b")}
    pages.commit()
    assert page_ids(pages.message_writes("a", entries(2))) == first["a"]
    pages.commit()
    pages.message_writes("c", entries(1))
    pages.commit()  # three open: "b" was written longest ago
    assert page_ids(pages.message_writes("a", entries(3))) == first["a"]
    assert page_ids(pages.message_writes("b", entries(2))) != first["b"]


def test_each_process_s_pages_are_its_own() -> None:
    one, other = OpenPages(), OpenPages()
    assert page_ids(one.message_writes("s", entries(1))) != page_ids(
        other.message_writes("s", entries(1))
    )


def test_a_message_larger_than_a_page_gets_one_of_its_own() -> None:
    pages = OpenPages(max_bytes=10)
    writes = pages.message_writes("s", [*entries(1, raw="y" * 25), *entries(2, 3)])
    assert len(page_ids(writes)) == 2
    assert list(writes[0]._doc["$set"]) == ["by_seq.1"]
    assert list(writes[1]._doc["$set"]) == ["by_seq.2", "by_seq.3"]
    assert writes[1]._doc["$min"] == {"first_seq": 2} and writes[1]._doc["$max"] == {"last_seq": 3}
