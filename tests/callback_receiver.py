"""A loopback HTTP server that records the callbacks it gets (push notification tests)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson


@dataclass
class CallbackReceiver:
    """Answers each POST with ``answer(n)`` (n = 0-based request number) and records it."""

    answer: Callable[[int], int] = lambda n: 200
    bodies: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def accepted(self) -> list[dict[str, Any]]:
        """The bodies answered with 2xx, in arrival order."""
        return [b for b, s in zip(self.bodies, self.statuses, strict=True) if s < 300]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                headers = {}
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        headers[key.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status = self.answer(len(self.statuses))
                self.statuses.append(status)
                self.headers.append(headers)
                self.raw.append(body)
                self.bodies.append(orjson.loads(body))
                writer.write(b"HTTP/1.1 %d X\r\nContent-Length: 0\r\n\r\n" % status)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def callback_receiver(answer: Callable[[int], int]) -> AsyncIterator[CallbackReceiver]:
    """A running receiver on an ephemeral loopback port."""
    receiver = CallbackReceiver(answer=answer)
    server = await asyncio.start_server(receiver._handle, "127.0.0.1", 0)
    receiver.port = server.sockets[0].getsockname()[1]
    try:
        yield receiver
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await server.wait_closed()
