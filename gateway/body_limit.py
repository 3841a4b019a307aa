"""Refuse oversized request bodies with a 413 problem.

A declared ``Content-Length`` above the limit is answered at once, without
handing the request to a route. Bodies without a length (chunked) are counted
as they are read; going over raises a 413 ``HTTPException`` inside the route,
which ``gateway.problems`` renders as a problem.

Either way the rest of the body is read and discarded first (up to
``DRAIN_FACTOR`` times the limit): a server that answers and closes while the
client is still uploading makes most clients report a broken connection
instead of the 413.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.problems import PayloadTooLarge, spindle_problem

DRAIN_FACTOR = 16


class ContentLengthLimit:
    """Pure ASGI middleware: 413 problem for a body above ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_bytes:
            error = PayloadTooLarge(
                f"request body is {declared} bytes; the limit is {self.max_bytes} bytes"
            )
            response = spindle_problem(error, scope.get("path"))
            if declared > self.max_bytes * DRAIN_FACTOR or not await self._drain(receive):
                response.headers["Connection"] = "close"
            await response(scope, receive, send)
            return
        await self.app(scope, self._counting(receive), send)

    async def _drain(self, receive: Receive, seen: int = 0) -> bool:
        """Read and drop the rest of the body; False if it is too long to drain."""
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return False
            seen += len(message.get("body", b""))
            if seen > self.max_bytes * DRAIN_FACTOR:
                return False
            if not message.get("more_body", False):
                return True

    def _counting(self, receive: Receive) -> Receive:
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    if message.get("more_body", False):
                        await self._drain(receive, seen)
                    raise HTTPException(
                        413, f"request body exceeds the limit of {self.max_bytes} bytes"
                    )
            return message

        return counted


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
