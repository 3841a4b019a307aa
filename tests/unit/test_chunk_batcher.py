"""Token batching into STREAMING_CHUNK texts, time driven by an injected clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from spindle.worker.contracts import ChatMessage
from spindle.worker.llm.base import LlmResponse, LlmStreamEvent, TextDelta, ToolCallDelta
from spindle.worker.llm.chunk_batcher import ChunkBatcher
from spindle.worker.llm.token_relay import relay_tokens

pytestmark = pytest.mark.unit

# The clock counts whole milliseconds (exact in floating point), so the batcher
# gets its interval in the same unit: 16 means 16 ms.
INTERVAL_MS = 16.0


class Clock:
    """A hand-driven monotonic clock, in milliseconds."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms


def batcher_on(clock: Clock) -> ChunkBatcher:
    return ChunkBatcher(interval=INTERVAL_MS, max_chars=200, clock=clock)


def feed(batcher: ChunkBatcher, clock: Clock, tokens: list[str], gap_ms: float) -> list[str]:
    """Tokens ``gap_ms`` apart; when a window falls due between two tokens the
    batcher is asked at that moment, as the relay does when it wakes up."""
    chunks: list[str] = []
    for token in tokens:
        arrival = clock.now + gap_ms
        deadline = batcher.deadline()
        if deadline is not None and deadline <= arrival:
            clock.now = deadline
            chunks += batcher.due()
        clock.now = arrival
        chunks += batcher.add(token)
    return chunks


def test_fast_stream_is_cut_every_200_characters() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    tokens = [f"w{n:03d} " for n in range(250)]  # 250 tokens of 5 chars, all at once
    chunks: list[str] = []
    for token in tokens:
        chunks += batcher.add(token)
    last = batcher.finish()

    assert [len(c) for c in chunks] == [200] * 6
    assert last is not None and len(last) == 50
    assert "".join(chunks) + last == "".join(tokens)


def test_fast_stream_within_16_ms_windows() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    # A token of 4 characters every 1 ms: 16 ms collect 64 characters, so the
    # window cuts first, always after 16 tokens.
    chunks = feed(batcher, clock, ["abc "] * 100, gap_ms=1)
    last = batcher.finish()

    assert [len(c) for c in chunks] == [64] * 6
    assert last == "abc " * 4
    assert batcher.cut == 7


def test_fast_stream_fills_200_characters_before_16_ms_pass() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    # 10 characters every 0.5 ms: 200 characters take 10 ms, so size cuts first.
    tokens = [f"token{n:04d} " for n in range(100)]
    chunks = feed(batcher, clock, tokens, gap_ms=0.5)

    assert chunks == ["".join(tokens[k : k + 20]) for k in range(0, 100, 20)]
    assert batcher.finish() == ""  # the f:1 marker, nothing left to carry


def test_burst_larger_than_a_chunk_keeps_exact_boundaries() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    text = "".join(chr(ord("a") + n % 26) for n in range(450))
    assert batcher.add(text) == [text[:200], text[200:400]]
    assert batcher.pending == text[400:]
    # The rest waits for its own window, which starts with the burst.
    clock.advance(15)
    assert batcher.due() == []
    clock.advance(1)
    assert batcher.due() == [text[400:]]
    assert batcher.finish() == ""


def test_slow_stream_gives_one_chunk_per_token() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    tokens = [f" token{n}" for n in range(20)]
    chunks = feed(batcher, clock, tokens, gap_ms=25)
    last = batcher.finish()

    assert chunks == tokens[:-1]
    assert last == tokens[-1]


def test_token_waits_at_most_the_interval() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    assert batcher.add("Hello") == []
    assert batcher.deadline() == pytest.approx(clock.now + 16)
    clock.advance(10)
    assert batcher.add(" world") == []  # joins the open window
    clock.advance(6)
    assert batcher.due() == ["Hello world"]
    assert batcher.deadline() is None
    assert batcher.due() == []


def test_late_token_first_flushes_the_expired_window() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    batcher.add("one")
    clock.advance(40)  # nobody called due(): the next add cuts it
    assert batcher.add(" two") == ["one"]
    assert batcher.pending == " two"


def test_reply_within_one_window_streams_no_chunk() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    for token in ["A", " short", " answer."]:
        clock.advance(1)
        assert batcher.add(token) == []
    # The final ANSWER follows at once and carries the same text.
    assert batcher.finish() is None
    assert batcher.cut == 0


def test_finish_after_chunks_always_gives_the_final_chunk() -> None:
    clock = Clock()
    batcher = batcher_on(clock)
    batcher.add("x" * 200)
    assert batcher.finish() == ""  # nothing left, still the f:1 marker


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="interval"):
        ChunkBatcher(interval=0)
    with pytest.raises(ValueError, match="max_chars"):
        ChunkBatcher(max_chars=0)


async def token_by_token(tokens: list[str]) -> AsyncIterator[LlmStreamEvent]:
    """Each token a separate step of the event loop, as from a network stream."""
    for token in tokens:
        await asyncio.sleep(0)  # yields to the loop once; waits for nothing
        yield TextDelta(token)
    yield ToolCallDelta(0, id="c1", name="calc", arguments="{}")
    yield LlmResponse(message=ChatMessage(role="assistant", content="".join(tokens)))


async def test_relay_posts_in_order_and_marks_the_last_chunk() -> None:
    posted: list[tuple[str, bool]] = []

    async def sink(text: str, last: bool) -> None:
        posted.append((text, last))

    tokens = ["x" * 150, "y" * 150, "z" * 20]
    response = await relay_tokens(token_by_token(tokens), ChunkBatcher(), sink)

    assert response.message.content == "".join(tokens)
    assert [len(t) for t, _ in posted] == [200, 120]
    assert [last for _, last in posted] == [False, True]
    assert "".join(t for t, _ in posted) == "".join(tokens)


async def test_relay_flushes_on_time_while_the_model_pauses() -> None:
    posted: list[tuple[str, bool]] = []
    flushed = asyncio.Event()

    async def sink(text: str, last: bool) -> None:
        posted.append((text, last))
        flushed.set()

    release = asyncio.Event()

    async def stalled() -> AsyncIterator[LlmStreamEvent]:
        yield TextDelta("first")
        await release.wait()  # the model pauses until the chunk has gone out
        yield TextDelta(" second")
        yield LlmResponse(message=ChatMessage(role="assistant", content="first second"))

    relay = asyncio.create_task(relay_tokens(stalled(), ChunkBatcher(), sink))
    await asyncio.wait_for(flushed.wait(), timeout=5)
    assert posted == [("first", False)]
    release.set()
    await relay
    assert posted == [("first", False), (" second", True)]


async def test_relay_without_a_response_fails() -> None:
    async def cut_off() -> AsyncIterator[LlmStreamEvent]:
        yield TextDelta("half")

    async def sink(text: str, last: bool) -> None:
        pass

    with pytest.raises(RuntimeError, match="without a response"):
        await relay_tokens(cut_off(), ChunkBatcher(), sink)


async def test_reply_that_arrives_complete_posts_no_chunk() -> None:
    posted: list[tuple[str, bool]] = []

    async def sink(text: str, last: bool) -> None:
        posted.append((text, last))

    async def instant() -> AsyncIterator[LlmStreamEvent]:
        # Nothing awaited: every event is there before the relay could post.
        for _ in range(10):
            yield TextDelta("z" * 90)
        yield LlmResponse(message=ChatMessage(role="assistant", content="z" * 900))

    response = await relay_tokens(instant(), ChunkBatcher(), sink)
    assert response.message.content == "z" * 900
    assert posted == []
