"""Pure pieces of the client SDK: the SSE decoder, the once-only message cursor,
the token assembler and the problem-body errors."""

from __future__ import annotations

import httpx
import orjson
import pytest

from spindle.client import (
    ChunkEvent,
    ClientConfig,
    MessageCursor,
    NotFoundError,
    StreamedMessage,
    TokenAssembler,
    ValidationError,
)
from spindle.client.errors import ApiError, RateLimitedError, api_error
from spindle.client.sse import SseDecoder, SseEvent
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message

pytestmark = pytest.mark.unit


def feed(decoder: SseDecoder, text: str) -> list[SseEvent]:
    events = [decoder.line(line) for line in text.split("\n")]
    return [e for e in events if e is not None]


def test_sse_decoder_reads_ids_data_comments_and_retry() -> None:
    decoder = SseDecoder()
    events = feed(
        decoder,
        'retry: 2000\n\n: keep-alive\n\nid: 7\ndata: {"t":3}\n\n'
        "id: 8\ndata: line one\ndata:line two\nevent: custom\n\n",
    )
    assert events == [
        SseEvent('{"t":3}', "7", None),
        SseEvent("line one\nline two", "8", "custom"),
    ]
    assert decoder.retry_ms == 2000 and decoder.comments == 1


def test_sse_decoder_dispatches_nothing_without_data() -> None:
    decoder = SseDecoder()
    assert feed(decoder, "id: 3\n\n\n") == []
    # The next event does not inherit the earlier event's id.
    assert feed(decoder, "data: x\n\n") == [SseEvent("x", None, None)]


def wire(t: T, ts: int, text: str = "", **kw: object) -> dict[str, object]:
    return create_compact_message(t, text or None, timestamp=ts, **kw).to_wire()  # type: ignore[arg-type]


def test_cursor_keeps_each_message_once_by_ts_then_by_seq() -> None:
    cursor = MessageCursor("r1")
    history = [cursor.accept(wire(T.UPDATE, ts), seq=None, replayed=True) for ts in (10, 11)]
    assert [m.ts for m in history if m] == [10, 11]
    # The live phase resends ts 11 (seq 2) and brings ts 12 (seq 3).
    again = cursor.accept(orjson.dumps(wire(T.UPDATE, 11)), seq=2, replayed=False)
    new = cursor.accept(orjson.dumps(wire(T.UPDATE, 12)), seq=3, replayed=False)
    assert again is None
    assert new is not None and new.seq == 3 and not new.replayed
    # A reconnection resending seq 3 is dropped, seq 4 kept.
    assert cursor.accept(orjson.dumps(wire(T.UPDATE, 12)), seq=3, replayed=False) is None
    assert cursor.accept(orjson.dumps(wire(T.ANSWER, 13)), seq=4, replayed=False) is not None
    assert (cursor.last_seq, cursor.last_ts) == (4, 13)
    assert cursor.accept(b"not json at all", seq=5, replayed=False) is None
    assert cursor.accept({"nope": 1}, seq=5, replayed=False) is None


def test_streamed_message_carries_both_formats() -> None:
    compact = create_compact_message(
        T.ANSWER, "hi", workstream_id="ws-1", timestamp=5, activity_id="a1"
    )
    item = StreamedMessage.of(compact, "run-9", seq=4, replayed=False)
    assert item.message.workflow_run_id == "run-9"
    assert item.message.type is T.ANSWER and item.message.message == "hi"
    assert item.message.workstream_id == "ws-1" and item.workstream == "ws-1"
    assert item.compact.to_wire() == {"ts": 5, "t": 7, "m": "hi", "w": "ws-1", "i": "a1"}
    assert not item.ends_conversation
    end = StreamedMessage.of(create_compact_message(T.COMPLETE), "r", seq=9, replayed=False)
    child_end = StreamedMessage.of(
        create_compact_message(T.COMPLETE, workstream_id="ws-1"), "r", seq=9, replayed=False
    )
    assert end.ends_conversation and not child_end.ends_conversation


def item(
    t: T, text: str = "", *, i: str | None = "act-1", f: bool | None = None
) -> StreamedMessage:
    compact = create_compact_message(t, text or None, activity_id=i, final=f)
    return StreamedMessage.of(compact, "r", seq=None, replayed=False)


def test_assembler_appends_chunks_and_the_final_answer_supersedes_them() -> None:
    tokens = TokenAssembler()
    assert tokens.feed(item(T.STREAMING_CHUNK, "Hel")).event is ChunkEvent.STARTED
    update = tokens.feed(item(T.STREAMING_CHUNK, "lo", f=True))
    assert update.event is ChunkEvent.APPENDED
    assert update.live is not None and update.live.complete and update.live.chunks == 2
    assert tokens.text("act-1") == "Hello"
    final = tokens.feed(item(T.ANSWER, "Hello"))
    assert final.event is ChunkEvent.SUPERSEDED and final.live is not None
    assert final.live.text == "Hello"
    assert tokens.live == {} and tokens.text("act-1") is None


def test_assembler_keeps_activities_apart_and_voids_on_restart() -> None:
    tokens = TokenAssembler()
    tokens.feed(item(T.STREAMING_CHUNK, "garbled par", i="a"))
    tokens.feed(item(T.STREAMING_CHUNK, "thinking", i="b"))
    assert tokens.feed(item(T.RESTARTING, "retrying", i="a")).event is ChunkEvent.VOIDED
    assert tokens.text("a") is None and tokens.text("b") == "thinking"
    tokens.feed(item(T.STREAMING_CHUNK, "clean answer", i="a"))
    assert tokens.text("a") == "clean answer"
    assert tokens.feed(item(T.THOUGHT, "thinking", i="b")).event is ChunkEvent.SUPERSEDED
    assert list(tokens.live) == [("main", "a")]


def test_assembler_keys_chunks_by_workstream_and_activity() -> None:
    tokens = TokenAssembler()
    chunk = create_compact_message(
        T.STREAMING_CHUNK, "child", workstream_id="ws-1", activity_id="a"
    )
    tokens.feed(StreamedMessage.of(chunk, "r", seq=None, replayed=False))
    tokens.feed(item(T.STREAMING_CHUNK, "parent", i="a"))
    assert tokens.text("a", "ws-1") == "child" and tokens.text("a") == "parent"
    assert tokens.feed(item(T.ANSWER, "parent!", i="a")).event is ChunkEvent.SUPERSEDED
    assert tokens.text("a", "ws-1") == "child" and tokens.text("a") is None
    tokens.feed(item(T.STREAMING_CHUNK, None, i="a", f=True))  # a bare f: 1 marker
    assert tokens.text("a") == ""


def test_assembler_ignores_messages_unrelated_to_chunks() -> None:
    tokens = TokenAssembler()
    assert tokens.feed(item(T.ANSWER, "no chunks before")).event is ChunkEvent.NONE
    tokens.feed(item(T.STREAMING_CHUNK, "x"))
    assert tokens.feed(item(T.UPDATE, "tool ran")).event is ChunkEvent.NONE
    assert tokens.feed(item(T.ANSWER, "other", i=None)).event is ChunkEvent.NONE
    assert tokens.text("act-1") == "x"


def test_problem_bodies_become_typed_errors() -> None:
    body = orjson.dumps(
        {
            "title": "Invalid input",
            "status": 422,
            "detail": "decision: 'maybe' is not one of ['approve', 'reject']",
            "errors": [{"field": "decision", "rule": "enum"}],
        }
    )
    error = api_error(422, body, httpx.Headers())
    assert isinstance(error, ValidationError) and isinstance(error, SpindleError)
    assert error.status == 422 and error.errors == [{"field": "decision", "rule": "enum"}]
    assert "decision" in str(error)
    missing = api_error(404, b"", httpx.Headers())
    assert isinstance(missing, NotFoundError) and missing.detail == "Not Found"
    limited = api_error(429, b"slow down", httpx.Headers({"Retry-After": "7"}))
    assert isinstance(limited, RateLimitedError) and limited.retry_after == 7.0
    assert limited.detail == "slow down"
    assert type(api_error(418, b"", httpx.Headers())) is ApiError


def test_config_from_env_and_credential_headers() -> None:
    env = {"SPINDLE_URL": "http://gw:9000", "SPINDLE_API_KEY": "spk_a_b"}
    config = ClientConfig.from_env(env)
    assert config.base_url == "http://gw:9000"
    assert config.headers()["X-API-Key"] == "spk_a_b"
    assert "Authorization" not in config.headers()
    bearer = ClientConfig.from_env({"SPINDLE_TOKEN": "jwt"}, base_url="http://x")
    assert bearer.headers()["Authorization"] == "Bearer jwt" and bearer.base_url == "http://x"
    assert ClientConfig.from_env({}).headers().keys() == {"User-Agent"}
