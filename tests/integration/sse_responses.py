"""An SSE stream served to an in-process ASGI client, for tests of
``EventStreamResponse`` against a real Redis (no HTTP server between)."""

from __future__ import annotations

import asyncio
import re

from starlette.types import Message, Scope

from spindle.gateway.limits.tenant_limits import StreamLease
from spindle.gateway.streams.sse import EventStreamResponse, RunEventStream, StreamCursor
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus, StoredMessage

SCOPE: Scope = {"type": "http", "path": "/runs/x/y/stream"}
IDS = re.compile(rb"^id: (\d+)$", re.MULTILINE)


class SseClient:
    """The ASGI side of one SSE client: records what it receives, hangs up on
    demand, and while not ``reading`` its ``send`` waits, as uvicorn's does
    when its flow control has paused the transport."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.body = b""
        self.finished = False
        self.hang_up = asyncio.Event()
        self.reading = asyncio.Event()
        self.reading.set()
        self.waits = 0

    async def receive(self) -> Message:
        await self.hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if not self.reading.is_set():
            self.waits += 1
            await self.reading.wait()
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.body += message.get("body", b"")
            self.finished = not message.get("more_body", False)

    @property
    def seqs(self) -> list[int]:
        """The ``id:`` of every frame received, in order."""
        return [int(seq) for seq in IDS.findall(self.body)]


def sse_response(
    stream_id: str,
    bus: MessageBus,
    hub: SubscriptionHub,
    *,
    keepalive: float,
    cursor: StreamCursor | None = None,
    lease: StreamLease | None = None,
) -> EventStreamResponse:
    """The gateway's SSE response for a run's stream, reading its backlog from ``bus``."""

    async def read_backlog(after: int, since_ts: int | None) -> list[StoredMessage]:
        return await bus.history(stream_id, after_seq=after, since_ts=since_ts)

    return EventStreamResponse(
        RunEventStream(
            stream_id,
            hub=hub,
            bus=bus,
            read_backlog=read_backlog,
            cursor=cursor or StreamCursor(),
            keepalive_seconds=keepalive,
            lease=lease,
        )
    )
