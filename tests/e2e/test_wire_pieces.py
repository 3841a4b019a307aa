"""The small wire-format pieces the e2e tests and the gateway rely on, checked
without servers: the SSE reader, SSE frames, Accept-Encoding and log redaction."""

from __future__ import annotations

import pytest

from spindle.gateway.api.routes.history import accepts_gzip
from spindle.gateway.http.access_log import redact_query
from spindle.gateway.streams.sse import frame
from tests.e2e.sse_client import SseComment, SseEvent, SseParser

pytestmark = pytest.mark.unit


def feed_all(chunks: list[bytes]) -> tuple[list[SseEvent | SseComment], SseParser]:
    parser = SseParser()
    items: list[SseEvent | SseComment] = []
    for chunk in chunks:
        items.extend(parser.feed(chunk))
    return items, parser


def test_sse_parser_reads_frames_split_anywhere() -> None:
    wire = frame(1, b'{"t":3,"m":"a"}') + b": keep-alive\n\n" + frame(2, b'{"t":4}')
    whole, _ = feed_all([wire])
    assert whole == [
        SseEvent('{"t":3,"m":"a"}', id="1"),
        SseComment("keep-alive"),
        SseEvent('{"t":4}', id="2"),
    ]
    for cut in range(1, len(wire)):
        split, _ = feed_all([wire[:cut], wire[cut:]])
        assert split == whole, cut


def test_sse_parser_line_ends_fields_and_retry() -> None:
    items, parser = feed_all([b"retry: 1500\r\nevent: x\r\ndata: a\rdata: b\r\nid: 7\r\n\r\n"])
    assert items == [SseEvent("a\nb", id="7", event="x")]
    assert parser.retry == 1500 and parser.last_event_id == "7"
    items, _ = feed_all([b"data: no id\n\n", b"id: 9\n\n"])
    assert items == [SseEvent("no id")], "an id without data dispatches nothing"


def test_sse_frame_is_the_stored_bytes() -> None:
    raw = b'{"ts":1,"t":7,"m":"caf\xc3\xa9"}'
    assert frame(42, raw) == b"id: 42\ndata: " + raw + b"\n\n"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("br, gzip;q=0.5", True),
        ("GZIP", True),
        ("gzip;q=0", False),
        ("*", True),
        ("*, gzip;q=0", False),
        ("identity", False),
        ("deflate, br", False),
    ],
)
def test_accept_encoding(header: str | None, expected: bool) -> None:
    assert accepts_gzip(header) is expected


def test_stream_tokens_are_masked_in_logs() -> None:
    line = "GET /runs/a/b/stream?since=5&access_token=abc.def&skipHistory=true HTTP/1.1"
    assert redact_query(line) == (
        "GET /runs/a/b/stream?since=5&access_token=***&skipHistory=true HTTP/1.1"
    )
    assert redact_query("/x?token=s3cr3t") == "/x?token=***"
    assert redact_query("/x?tokens=1") == "/x?tokens=1"
