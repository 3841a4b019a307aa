"""A small, strict Server-Sent Events reader for tests (WHATWG event-stream rules).

``SseParser`` turns bytes into ``SseEvent`` (an event was dispatched) and
``SseComment`` (a ``:`` line, e.g. keep-alives) items, handling CRLF/LF/CR line
ends, lines split across chunks, multi-line ``data``, ``id``, ``event`` and
``retry`` fields. ``SseConnection`` opens a stream with httpx and reads items
with deadlines, so tests wait on events rather than sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson


@dataclass(frozen=True)
class SseEvent:
    """One dispatched event. ``id`` is the event's own id field (None if absent)."""

    data: str
    id: str | None = None
    event: str | None = None

    def json(self) -> Any:
        return orjson.loads(self.data)

    @property
    def seq(self) -> int:
        assert self.id is not None, "event has no id"
        return int(self.id)


@dataclass(frozen=True)
class SseComment:
    text: str


@dataclass
class SseParser:
    """Incremental parser; ``feed`` returns what the new bytes completed."""

    retry: int | None = None
    last_event_id: str | None = None
    _buffer: bytes = b""
    _data: list[str] = field(default_factory=list)
    _event: str | None = None
    _id: str | None = None

    def feed(self, chunk: bytes) -> list[SseEvent | SseComment]:
        out: list[SseEvent | SseComment] = []
        self._buffer += chunk
        while True:
            cut = _line_end(self._buffer)
            if cut is None:
                break
            end, width = cut
            line = self._buffer[:end].decode("utf-8")
            self._buffer = self._buffer[end + width :]
            item = self._line(line)
            if item is not None:
                out.append(item)
        return out

    def _line(self, line: str) -> SseEvent | SseComment | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return SseComment(line[1:].lstrip(" "))
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
                self.last_event_id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event, event_id = self._data, self._event, self._id
        self._data, self._event, self._id = [], None, None
        if not data:
            return None
        return SseEvent(data="\n".join(data), id=event_id, event=event)


def _line_end(buffer: bytes) -> tuple[int, int] | None:
    """(index, width) of the first line terminator: CRLF, LF or CR.

    A CR that ends the buffer waits for the next chunk (it may be half a CRLF).
    """
    for i, byte in enumerate(buffer):
        if byte == 0x0A:
            return i, 1
        if byte == 0x0D:
            if i + 1 == len(buffer):
                return None
            return (i, 2) if buffer[i + 1] == 0x0A else (i, 1)
    return None


class StreamEnded(Exception):
    """The server ended the response."""


class SseConnection:
    """An open SSE response with a parser and deadline-bounded reads.

    Use ``open_sse`` to create one. ``events`` collects every event read, and
    ``comments`` every comment; ``ended`` turns true when the server closed.
    """

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.parser = SseParser()
        self.events: list[SseEvent] = []
        self.comments: list[SseComment] = []
        self.ended = False
        self._chunks = response.aiter_bytes()
        self._ready: list[SseEvent | SseComment] = []

    async def next_item(self, timeout: float = 30.0) -> SseEvent | SseComment:
        """The next event or comment.

        Raises:
            StreamEnded: the server ended the response first.
            TimeoutError: nothing arrived within ``timeout``.
        """
        async with asyncio.timeout(timeout):
            while not self._ready:
                if self.ended:
                    raise StreamEnded()
                try:
                    chunk = await anext(self._chunks)
                except StopAsyncIteration:
                    self.ended = True
                    raise StreamEnded() from None
                self._ready.extend(self.parser.feed(chunk))
        item = self._ready.pop(0)
        if isinstance(item, SseEvent):
            self.events.append(item)
        else:
            self.comments.append(item)
        return item

    async def next_event(self, timeout: float = 30.0) -> SseEvent:
        """The next event, skipping comments."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            item = await self.next_item(max(0.01, deadline - loop.time()))
            if isinstance(item, SseEvent):
                return item

    async def until(self, predicate: Callable[[SseEvent], bool], timeout: float = 30.0) -> SseEvent:
        """Read events until one satisfies ``predicate``; returns it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            event = await self.next_event(max(0.01, deadline - loop.time()))
            if predicate(event):
                return event

    async def until_type(self, message_type: int, timeout: float = 30.0) -> SseEvent:
        """Read until a message of this ``AgentMessageType`` value arrives."""
        return await self.until(lambda e: e.json().get("t") == message_type, timeout)

    async def read_to_end(self, timeout: float = 30.0) -> list[SseEvent]:
        """Read until the server ends the response; returns the events read meanwhile."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        start = len(self.events)
        with contextlib.suppress(StreamEnded):
            while True:
                await self.next_item(max(0.01, deadline - loop.time()))
        return self.events[start:]


@contextlib.asynccontextmanager
async def open_sse(
    client: httpx.AsyncClient,
    url: str,
    *,
    params: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[SseConnection]:
    """Open an SSE stream; the caller checks ``.response.status_code``.

    Leaving the block closes the connection (a client disconnect).
    """
    request_headers = {"Accept": "text/event-stream", **(headers or {})}
    async with client.stream("GET", url, params=params, headers=request_headers) as response:
        yield SseConnection(response)
