"""Token streaming on the real Redis bus and the real Temporal dev server.

What is checked is what a client sees on a run's stream: STREAMING_CHUNK
messages carrying the LLM turn's activity id, the final chunk marked ``f: 1``,
the THOUGHT/ANSWER of the same id superseding them, a retried turn announcing
itself with RESTARTING (same id) before streaming again, and the history
compacted to the final messages. ``client_view`` applies the client rule of the
docs/streaming/index.md ("Token streaming").
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from temporalio import activity
from temporalio.client import Client

from spindle.gateway.streams.history import compact_superseded, stored_messages
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.worker.activities.agent import AgentActivities
from spindle.worker.contracts import ChatMessage, LlmTurnInput, NodeExecution, RunRef
from spindle.worker.llm.base import LlmRequest, LlmResponse, LlmStreamEvent, TextDelta
from spindle.worker.llm.offline import OfflineProvider, offline_tokens
from spindle.worker.main import build_worker
from spindle.worker.posting.chunk_poster import ChunkPoster
from spindle.worker.posting.poster import MessagePoster
from tests.integration.activity_env import env
from tests.polling import eventually

pytestmark = pytest.mark.integration

Key = tuple[str, str | None]


def client_view(messages: list[dict[str, Any]]) -> tuple[list[str], dict[Key, str]]:
    """What a client following the docs' client rule shows: the final THOUGHT/ANSWER
    texts, and the streamed texts still on screen, per (workstream, activity)."""
    finals: list[str] = []
    live: dict[Key, str] = {}
    for message in messages:
        key = (message.get("w", "main"), message.get("i"))
        if message["t"] == T.STREAMING_CHUNK:
            live[key] = live.get(key, "") + message.get("m", "")
        elif message["t"] in (T.THOUGHT, T.ANSWER):
            live.pop(key, None)
            finals.append(message.get("m", ""))
        elif message["t"] == T.RESTARTING:
            live.pop(key, None)  # the failed attempt's tokens are void
    return finals, live


def new_run(workstream: str = "main") -> RunRef:
    wf = f"tok-{uuid.uuid4().hex[:12]}"
    return RunRef(
        workflow_id=wf, run_id="run-1", stream_id=wf, graph_name="g", workstream_id=workstream
    )


def execution(run: RunRef, prompt: str) -> NodeExecution:
    return NodeExecution(
        run=run,
        node=NodeSpec.model_validate(
            {"id": "agent", "type": "agent", "params": {"prompt": prompt}}
        ),
        state={"input": None, "context": {}, "meta": {}},
        started_at=datetime.now(UTC).isoformat(),
    )


async def wire(bus: MessageBus, stream_id: str) -> list[dict[str, Any]]:
    return [orjson.loads(m.raw) for m in await bus.history(stream_id)]


@pytest.fixture(scope="module")
def streaming(activity_settings: Settings) -> Settings:
    """Settings of a worker that streams the model's tokens."""
    return activity_settings.model_copy(update={"llm_streaming": True})


async def test_offline_answer_streams_as_chunks_then_the_answer(
    bus: MessageBus, streaming: Settings
) -> None:
    run = new_run("ws-7")
    # 20 ms between tokens: slower than the 16 ms window, so tokens go out as they come.
    acts = AgentActivities(bus, None, OfflineProvider(token_delay=0.02), settings=streaming)
    prompt = "Tell me what the streaming chunks carry on the wire"
    result = await env("12").run(
        acts.llm_turn,
        LlmTurnInput(execution=execution(run, prompt), turn=1, messages=[]),
    )
    answer = result.message.content or ""

    messages = await wire(bus, run.stream_id)
    chunks = [m for m in messages if m["t"] == T.STREAMING_CHUNK]
    assert [m["t"] for m in messages] == [T.STREAMING_CHUNK] * len(chunks) + [T.ANSWER]
    assert len(chunks) >= 2
    assert "".join(c.get("m", "") for c in chunks) == answer
    assert all(len(c.get("m", "")) <= 200 for c in chunks)
    # Every chunk and the answer carry the turn's activity id and workstream.
    assert {(m["i"], m["w"]) for m in messages} == {("12", "ws-7")}
    assert [c.get("f") for c in chunks] == [None] * (len(chunks) - 1) + [1]
    assert messages[-1]["m"] == answer
    assert client_view(messages) == ([answer], {})


async def test_history_compacts_chunks_to_the_final_message(bus: MessageBus) -> None:
    stream = f"tok-{uuid.uuid4().hex[:12]}"

    async def post(t: T, text: str | None, i: str | None, w: str | None = None, **kw: Any) -> int:
        message = create_compact_message(t, text, activity_id=i, workstream_id=w, **kw)
        return (await bus.post(stream, message)).seq

    seqs: dict[str, int] = {}
    seqs["a1"] = await post(T.STREAMING_CHUNK, "Hel", "5")
    seqs["a2"] = await post(T.STREAMING_CHUNK, "lo", "5", final=True)
    seqs["ws_live"] = await post(T.STREAMING_CHUNK, "still ", "5", "ws-1")  # other workstream
    seqs["b_void"] = await post(T.STREAMING_CHUNK, "garb", "7")
    seqs["b_restart"] = await post(
        T.RESTARTING, "retrying (attempt 2)", "7", details={"attempt": 2}
    )
    seqs["a_answer"] = await post(T.ANSWER, "Hello", "5")
    seqs["b1"] = await post(T.STREAMING_CHUNK, "Thinking", "7", final=True)
    seqs["b_thought"] = await post(T.THOUGHT, "Thinking", "7")
    seqs["update"] = await post(T.UPDATE, "Using tool x", None)
    seqs["ws_more"] = await post(T.STREAMING_CHUNK, "typing", "5", "ws-1")

    stored = await stored_messages(stream, bus=bus, archive=None)
    compacted = compact_superseded(stored)

    kept = {name for name, seq in seqs.items() if seq in {m.seq for m in compacted}}
    assert kept == {"ws_live", "b_restart", "a_answer", "b_thought", "update", "ws_more"}
    # Same stored bytes, same seqs, same order: nothing re-encoded.
    by_seq = {m.seq: m for m in stored}
    assert compacted == [by_seq[m.seq] for m in compacted]
    assert [m.seq for m in compacted] == sorted(m.seq for m in compacted)
    # The compacted history shows what the client rule shows.
    finals, live = client_view([orjson.loads(m.raw) for m in compacted])
    assert (finals, live) == client_view([orjson.loads(m.raw) for m in stored])
    assert live == {("ws-1", "5"): "still typing"}

    # The workstream's stream ends; its chunks go too. Nothing to drop: same list.
    await post(T.ANSWER, "still typing", "5", "ws-1")
    again = compact_superseded(await stored_messages(stream, bus=bus, archive=None))
    assert [orjson.loads(m.raw)["t"] for m in again] == [
        T.RESTARTING,
        T.ANSWER,
        T.THOUGHT,
        T.UPDATE,
        T.ANSWER,
    ]
    assert compact_superseded(again) is again
    await bus.delete_stream(stream)


async def test_reused_activity_id_keeps_the_newer_stream(bus: MessageBus) -> None:
    """A workstream that continued as new numbers its activities from 1 again:
    an answer only supersedes the chunks before it."""
    stream = f"tok-{uuid.uuid4().hex[:12]}"
    for message in [
        create_compact_message(T.STREAMING_CHUNK, "old", activity_id="3", workstream_id="w"),
        create_compact_message(T.ANSWER, "old", activity_id="3", workstream_id="w"),
        create_compact_message(T.STREAMING_CHUNK, "new", activity_id="3", workstream_id="w"),
    ]:
        await bus.post(stream, message)
    compacted = compact_superseded(await stored_messages(stream, bus=bus, archive=None))
    assert [(m["t"], m["m"]) for m in (orjson.loads(c.raw) for c in compacted)] == [
        (T.ANSWER, "old"),
        (T.STREAMING_CHUNK, "new"),
    ]
    await bus.delete_stream(stream)


async def test_retry_after_the_answer_was_posted_streams_nothing_new(
    bus: MessageBus, streaming: Settings
) -> None:
    """Attempt 1 streamed and posted its ANSWER, then failed (say, archiving the
    report). Attempt 2's ANSWER is a duplicate the bus ignores, so it must not
    stream chunks that nothing would supersede."""
    run = new_run()
    acts = AgentActivities(bus, None, OfflineProvider(token_delay=0.02), settings=streaming)
    turn = LlmTurnInput(execution=execution(run, "a question worth streaming"), turn=1, messages=[])
    await env("4", attempt=1).run(acts.llm_turn, turn)
    first = await wire(bus, run.stream_id)
    assert first[0]["t"] == T.STREAMING_CHUNK and first[-1]["t"] == T.ANSWER

    await env("4", attempt=2).run(acts.llm_turn, turn)
    after = await wire(bus, run.stream_id)
    assert after[: len(first)] == first
    assert [(m["t"], m["i"], m["d"]) for m in after[len(first) :]] == [
        (T.RESTARTING, "4", {"attempt": 2})
    ]
    finals, live = client_view(after)
    assert finals == [first[-1]["m"]] and live == {}


async def test_chunk_keys_dedup_within_an_attempt_not_across(
    bus: MessageBus, activity_settings: Settings
) -> None:
    run = new_run()

    def sink(attempt: int) -> ChunkPoster:
        limit = activity_settings.max_message_bytes
        poster = MessagePoster(bus, run, activity_id="9", attempt=attempt, max_message_bytes=limit)
        return ChunkPoster(poster)

    first = sink(1)
    for text, last in [("a", False), ("b", True)]:
        await first(text, last)
    again = sink(1)  # the same attempt posting the same chunks again (a re-sent post)
    for text, last in [("a", False), ("b", True)]:
        await again(text, last)
    retried = sink(2)  # a new attempt: its own keys, even for the same text
    assert await retried.open()
    for text, last in [("a", False), ("b", True)]:
        await retried(text, last)

    messages = await wire(bus, run.stream_id)
    assert [(m["m"], m.get("f"), m["i"]) for m in messages] == [
        ("a", None, "9"),
        ("b", 1, "9"),
        ("a", None, "9"),
        ("b", 1, "9"),
    ]


# ----- a retried LLM turn on the real dev server -------------------------------------

ANSWER_TEXT = (
    "Redis keeps the newest thousand messages of every run in a capped list, "
    "publishes each one on the run's channel, and the archive keeps the rest."
)


@dataclasses.dataclass
class FlakyStreamingLlm:
    """Streams ``ANSWER_TEXT``; attempt 1 breaks off once its first chunk is on
    the run's stream (a dropped connection mid-stream), attempt 2 completes."""

    bus: MessageBus
    name: str = "flaky"
    attempts: list[int] = dataclasses.field(default_factory=list)

    async def complete(self, request: LlmRequest) -> LlmResponse:
        raise AssertionError("the worker streams")

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmStreamEvent]:
        info = activity.info()
        self.attempts.append(info.attempt)
        tokens = offline_tokens(ANSWER_TEXT)
        half = len(tokens) // 2
        for token in tokens[:half]:
            yield TextDelta(token)
        # Wait (the model is slow) until this attempt's first chunk went out.
        await eventually(
            lambda: self._chunk_after_restart(info.workflow_id or "", info.attempt),
            what=f"a chunk of attempt {info.attempt}",
        )
        if info.attempt == 1:
            raise ConnectionResetError("the model's connection dropped mid-stream")
        for token in tokens[half:]:
            yield TextDelta(token)
        yield LlmResponse(message=ChatMessage(role="assistant", content=ANSWER_TEXT), model="flaky")

    async def _chunk_after_restart(self, stream_id: str, attempt: int) -> bool:
        messages = await wire(self.bus, stream_id)
        restarts = [k for k, m in enumerate(messages) if m["t"] == T.RESTARTING]
        start = restarts[-1] + 1 if attempt > 1 and restarts else 0
        return any(m["t"] == T.STREAMING_CHUNK for m in messages[start:])


async def test_llm_turn_failing_mid_stream_restarts_cleanly(
    temporal_client: Client, settings: Settings
) -> None:
    bus = MessageBus.from_settings(settings)
    llm = FlakyStreamingLlm(bus)
    queue = f"tok-retry-{uuid.uuid4().hex[:8]}"
    graph = parse_graph(
        {
            "name": "flaky-stream",
            "entry": "agent",
            "nodes": [
                {
                    "id": "agent",
                    "type": "agent",
                    "params": {"prompt": "Where do messages live?"},
                    "retry": {"max_attempts": 3, "initial_interval_seconds": 0.1},
                }
            ],
            "edges": [],
        }
    )
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=None, llm=llm, task_queue=queue
        ):
            handle = await temporal_client.start_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=graph),
                id=f"flaky-stream-{uuid.uuid4().hex[:10]}",
                task_queue=queue,
                result_type=GraphRunResult,
            )
            result: GraphRunResult = await asyncio.wait_for(handle.result(), 60)
        stored = await stored_messages(handle.id, bus=bus, archive=None)
    finally:
        await bus.close()
    messages = [orjson.loads(m.raw) for m in stored]

    assert llm.attempts == [1, 2]
    assert result.output == ANSWER_TEXT
    turn = [m for m in messages if m["t"] in (T.STREAMING_CHUNK, T.RESTARTING, T.ANSWER)]
    kinds = [m["t"] for m in turn]
    restart = kinds.index(T.RESTARTING)
    # Chunks of the failed attempt, RESTARTING, a full second stream, one ANSWER.
    assert restart >= 1 and set(kinds[:restart]) == {T.STREAMING_CHUNK}
    assert kinds[restart + 1 : -1] and set(kinds[restart + 1 : -1]) == {T.STREAMING_CHUNK}
    assert kinds[-1] == T.ANSWER and kinds.count(T.ANSWER) == 1
    assert len({m["i"] for m in turn}) == 1  # all of the same LLM turn
    assert turn[restart]["d"]["attempt"] == 2
    assert all("f" not in m for m in turn[:restart])  # the broken stream never ended
    second = turn[restart + 1 : -1]
    assert "".join(m.get("m", "") for m in second) == ANSWER_TEXT
    assert second[-1]["f"] == 1
    # A client that ignored RESTARTING would show a garbled double answer...
    naive = "".join(m.get("m", "") for m in turn if m["t"] == T.STREAMING_CHUNK)
    assert naive != ANSWER_TEXT and naive.endswith(ANSWER_TEXT)
    # ...one following the rule shows exactly one answer, at every point of the stream.
    assert client_view(messages) == ([ANSWER_TEXT], {})
    for end in range(len(messages)):
        _, live = client_view(messages[:end])
        assert all(ANSWER_TEXT.startswith(text) for text in live.values())
    # The compacted history holds no chunk at all.
    compacted = [orjson.loads(m.raw) for m in compact_superseded(stored)]
    assert T.STREAMING_CHUNK not in [m["t"] for m in compacted]
    assert client_view(compacted) == ([ANSWER_TEXT], {})
