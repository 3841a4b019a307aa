"""Fan-out: N SSE viewers of one run through one gateway process, against a raw
Redis relay to N subscribers, interleaved message by message in the same run.

Both sides are read the same way, so the client's own cost is the same on each:
N plain TCP connections in this process, each an ``asyncio.Protocol`` that
looks for the current message's token in the bytes it receives (no HTTP or
RESP parser). The raw relay is N connections that sent ``SUBSCRIBE`` to Redis
and a ``PUBLISH`` of a ~300 B payload; the Spindle side is N ``GET …/stream``
requests to the gateway and a ``MessageBus.post`` of a ~300 B UPDATE. A
receipt's latency is from just before the publish/post call to the moment
its connection sees the token; each message waits for all N receipts (or a
bound) before the next one, and a viewer that misses or repeats a message is
counted, not waited for.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

import redis.asyncio as aioredis

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from spindle.shared.platform.settings import Settings

OPEN_BATCH = 100  # connections opened at once (the gateway opens each stream's subscription)
RECEIPT_BOUND_S = 10.0  # a message not seen by every viewer by then is counted as missed
TOKEN_BYTES = 12


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


class _Board:
    """The message in flight: its token, when it was sent, who has seen it."""

    def __init__(self, viewers: int) -> None:
        self.viewers = viewers
        self.token = b""
        self.started = 0.0
        self.latencies: list[float] = []
        self.seen = 0
        self.doubled = 0
        self.all_seen = asyncio.Event()
        self.slowest: list[float] = []  # per message: the last viewer's receipt

    def send(self, token: bytes) -> None:
        self.token = token
        self.seen = 0
        self.all_seen.clear()
        self.started = time.perf_counter()

    def saw(self) -> None:
        self.latencies.append((time.perf_counter() - self.started) * 1000)
        self.seen += 1
        if self.seen == self.viewers:
            self.all_seen.set()


class _Viewer(asyncio.Protocol):
    """One connection: ready once ``ready_marker`` arrived, then counts tokens."""

    def __init__(self, board: _Board, ready_marker: bytes) -> None:
        self.board = board
        self.ready_marker = ready_marker
        self.ready = asyncio.Event()
        self.closed = asyncio.Event()
        self.transport: asyncio.Transport | None = None
        self._tail = b""
        self._last = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._tail + data
        self._tail = buf[-TOKEN_BYTES:]
        if not self.ready.is_set():
            if self.ready_marker in buf:
                self.ready.set()
            return
        token = self.board.token
        if token and token in buf:
            if self._last == token:
                self.board.doubled += 1
                return
            self._last = token
            self.board.saw()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


async def _open(
    count: int, board: _Board, connect: Callable[[_Board], Awaitable[_Viewer]]
) -> list[_Viewer]:
    viewers: list[_Viewer] = []
    for start in range(0, count, OPEN_BATCH):
        batch = await asyncio.gather(
            *(connect(board) for _ in range(min(OPEN_BATCH, count - start)))
        )
        viewers.extend(batch)
    await asyncio.wait_for(asyncio.gather(*(v.ready.wait() for v in viewers)), 60)
    return viewers


async def _connect(host: str, port: int, request: bytes, marker: bytes, board: _Board) -> _Viewer:
    loop = asyncio.get_running_loop()
    _, viewer = await loop.create_connection(lambda: _Viewer(board, marker), host, port)
    assert viewer.transport is not None
    viewer.transport.write(request)
    return viewer


async def _deliver(board: _Board, token: bytes, send: Awaitable[object]) -> int:
    """Send one message (``send`` is the not yet awaited call) and wait until
    every viewer saw it; returns how many did not."""
    board.send(token)
    await send
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(board.all_seen.wait(), RECEIPT_BOUND_S)
    board.slowest.append((time.perf_counter() - board.started) * 1000)
    return board.viewers - board.seen


async def bench_fanout(
    settings: Settings, base_url: str, *, viewers: int = 1000, messages: int = 50
) -> dict[str, Any]:
    """p50/p99 post → receipt at each of ``viewers`` SSE clients vs a raw Redis relay."""
    redis_url = urlsplit(settings.redis_url)
    gateway = urlsplit(base_url)
    rhost, rport = redis_url.hostname or "127.0.0.1", redis_url.port or 6379
    ghost, gport = gateway.hostname or "127.0.0.1", gateway.port or 80
    channel = f"bench:fanout:{uuid.uuid4().hex}"
    stream_id = f"bench-fanout-{uuid.uuid4().hex}"

    bus = MessageBus.from_settings(settings)
    publisher = aioredis.Redis.from_url(settings.redis_url)
    await bus.set_meta(stream_id, {"run_id": "bench", "tenant_id": "default", "graph": "bench"})
    raw_board, sse_board = _Board(viewers), _Board(viewers)
    sub_cmd = b"*2\r\n$9\r\nSUBSCRIBE\r\n$%d\r\n%s\r\n" % (len(channel), channel.encode())
    get = (
        f"GET /runs/{stream_id}/bench/stream?skipHistory=true HTTP/1.1\r\n"
        f"Host: {ghost}:{gport}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    raw_viewers = await _open(
        viewers, raw_board, lambda b: _connect(rhost, rport, sub_cmd, b"subscribe", b)
    )
    sse_viewers = await _open(
        viewers, sse_board, lambda b: _connect(ghost, gport, get, b" 200 OK", b)
    )
    opened_s = time.perf_counter() - started
    # The 2N connections are this process's long-lived heap: frozen, a full
    # collection here no longer stalls both sides' receipts (it did, ~0.1-0.3 s).
    gc.collect()
    gc.freeze()
    filler = "fan-out " * 36  # ~300 B on the wire either way
    missed = {"raw": 0, "sse": 0}
    try:
        for i in range(messages):
            token = b"tk%08d%s" % (i, uuid.uuid4().hex[:2].encode())
            text = f"{token.decode()} {filler}"
            message = create_compact_message(AgentMessageType.UPDATE, text)
            missed["raw"] += await _deliver(raw_board, token, publisher.publish(channel, text))
            missed["sse"] += await _deliver(sse_board, token, bus.post(stream_id, message))
    finally:
        for viewer in (*raw_viewers, *sse_viewers):
            if viewer.transport is not None:
                viewer.transport.close()
        await bus.delete_stream(stream_id)
        await bus.close()
        await publisher.aclose()
    raw, sse = raw_board.latencies, sse_board.latencies
    r50, r99, s50, s99 = _pct(raw, 0.5), _pct(raw, 0.99), _pct(sse, 0.5), _pct(sse, 0.99)
    return {
        "viewers": viewers,
        "messages": messages,
        "open_all_s": round(opened_s, 2),
        "raw_relay_p50_ms": round(r50, 2),
        "raw_relay_p99_ms": round(r99, 2),
        "sse_p50_ms": round(s50, 2),
        "sse_p99_ms": round(s99, 2),
        "p50_ratio": round(s50 / r50, 2) if r50 else None,
        "p99_ratio": round(s99 / r99, 2) if r99 else None,
        "raw_slowest_messages_ms": [round(v, 1) for v in sorted(raw_board.slowest)[-5:]],
        "sse_slowest_messages_ms": [round(v, 1) for v in sorted(sse_board.slowest)[-5:]],
        "sse_missed": missed["sse"],
        "sse_doubled": sse_board.doubled,
        "raw_missed": missed["raw"],
    }
