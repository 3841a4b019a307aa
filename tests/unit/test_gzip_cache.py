"""The gzip body cache of ``/updates`` never serves a body for other messages."""

from __future__ import annotations

from spindle.gateway.streams.history import GzipCache
from spindle.shared.bus.message_bus import StoredMessage


def _messages(count: int, ts0: int = 1000) -> list[StoredMessage]:
    return [
        StoredMessage(seq, ts0 + seq, b'{"ts":%d,"t":3}' % (ts0 + seq))
        for seq in range(1, count + 1)
    ]


def test_a_new_message_or_other_filters_name_another_body() -> None:
    base = GzipCache.key("run", _messages(3), None, True)
    assert GzipCache.key("run", _messages(4), None, True) != base
    assert GzipCache.key("run", _messages(3), None, False) != base
    assert GzipCache.key("run", _messages(3), 1001, True) != base
    assert GzipCache.key("other", _messages(3), None, True) != base
    assert GzipCache.key("run", _messages(3), None, True) == base


def test_a_stream_posted_to_again_under_the_same_id_names_another_body() -> None:
    assert GzipCache.key("run", _messages(3), None, True) != GzipCache.key(
        "run", _messages(3, ts0=5000), None, True
    )


def test_the_least_recently_used_bodies_leave_first_within_the_byte_bound() -> None:
    cache = GzipCache(max_bytes=10)
    cache.put(("a",), b"12345")
    cache.put(("b",), b"12345")
    assert cache.get(("a",)) == b"12345"  # now the most recent
    cache.put(("c",), b"12345")
    assert cache.get(("b",)) is None
    assert cache.get(("a",)) == b"12345"
    assert cache.get(("c",)) == b"12345"
    cache.put(("huge",), b"x" * 11)
    assert cache.get(("huge",)) is None
