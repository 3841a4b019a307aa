"""The server's own ``send``, for responses that write many small chunks.

Starlette wraps ``send`` once per exception-handling layer (the app's
``ServerErrorMiddleware`` and ``ExceptionMiddleware``, and the route's own
``request_response``): each wrapper only watches for ``http.response.start`` to
know whether a response has begun. An SSE stream writes a frame per message per
viewer, and under fan-out those wrappers were a measurable part of the
per-viewer path (docs/benchmarks-history.md#stream-path). ``SpindleApp`` puts the send
it got from the server in the scope; a streaming response sends its start (and
its end) through the wrapped ``send``, so every layer sees the response begin,
and its body chunks through the server's.

``send_now`` runs a ``send`` up to where it would wait, from plain (not
``async``) code: the SSE stream writes a live frame from the subscription hub's
dispatch with it, rather than waking one task per viewer
(docs/streaming/gap-free.md#what-a-live-message-costs-a-gateway).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from types import CoroutineType
from typing import Any

from fastapi import FastAPI
from starlette.types import Message, Receive, Scope, Send

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


def send_now(send: Send, message: Message) -> asyncio.Future[None] | None:
    """Call ``send(message)`` and run it at once, up to its first wait.

    An ASGI server's ``send`` of a body chunk writes to its transport and
    returns without waiting, unless the client has stopped reading (the
    server's flow control), where it waits until the client catches up
    before it writes.

    Returns:
        None when the send completed now; otherwise a task that completes it.
        Anything sent to the same response after this must wait for that task.

    Raises:
        Exception: whatever ``send`` raised before its first wait.
    """
    call = send(message)
    # The exact type first: an ABC check per viewer per message shows up under fan-out.
    if type(call) is not CoroutineType and not isinstance(call, Coroutine):
        return asyncio.ensure_future(call)
    try:
        awaited = call.send(None)
    except StopIteration:
        return None
    task = asyncio.ensure_future(_Resumed(call, awaited))
    # A task cancelled before its first step never reaches the send: close it
    # where it waits (a no-op once it has finished).
    task.add_done_callback(lambda _: call.close())
    return task


class _Resumed:
    """A coroutine that ``send_now`` started, as an awaitable that goes on from its first wait.

    ``await`` cannot take a coroutine already suspended inside an ``await``
    (it raises "coroutine is being awaited already"), so this delegates by
    hand: it hands the awaited future to the task running it, then steps the
    coroutine on with what the task sends or throws (a cancellation reaches
    the ``send`` where it waits).
    """

    def __init__(self, call: Coroutine[Any, Any, None], awaited: Any) -> None:
        self._call = call
        self._awaited = awaited

    def __await__(self) -> Generator[Any, Any, None]:
        call, awaited = self._call, self._awaited
        while True:
            try:
                try:
                    sent = yield awaited
                except BaseException as exc:  # every throw goes on to the send
                    awaited = call.throw(exc)
                else:
                    awaited = call.send(sent)
            except StopIteration:
                return


__all__ = ["SERVER_SEND", "SpindleApp", "body_send", "send_now"]
