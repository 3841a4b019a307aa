"""The server's own ``send``, for responses that write many small chunks.

Starlette wraps ``send`` once per exception-handling layer (the app's
``ServerErrorMiddleware`` and ``ExceptionMiddleware``, and the route's own
``request_response``): each wrapper only watches for ``http.response.start`` to
know whether a response has begun. An SSE stream writes a frame per message per
viewer, and under fan-out those wrappers were a measurable part of the
per-viewer path (docs/benchmarks.md#stream-path). ``SpindleApp`` puts the send
it got from the server in the scope; a streaming response sends its start (and
its end) through the wrapped ``send``, so every layer sees the response begin,
and its body chunks through the server's.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

SERVER_SEND = "spindle.server_send"
"""Scope key of the ``send`` the ASGI server gave the app (HTTP requests only)."""


class SpindleApp(FastAPI):
    """FastAPI, with the server's ``send`` kept in each HTTP request's scope."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SERVER_SEND] = send
        await super().__call__(scope, receive, send)


def body_send(scope: Scope, send: Send) -> Send:
    """The ``send`` for body chunks of a response whose start went through ``send``."""
    server_send: Send | None = scope.get(SERVER_SEND)
    return server_send if server_send is not None else send


__all__ = ["SERVER_SEND", "SpindleApp", "body_send"]
