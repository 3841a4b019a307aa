"""``send_now``: an ASGI ``send`` run from plain code up to its first wait, and
finished by a task when it waits (the server's flow control)."""

from __future__ import annotations

import asyncio

import pytest
from starlette.types import Message

from spindle.gateway.http.server_send import send_now

BODY: Message = {"type": "http.response.body", "body": b"frame", "more_body": True}


async def _after_callbacks_scheduled_now() -> None:
    """Return once the loop has run every callback scheduled before this call
    (a new task's first step is one): they run in the order they were scheduled."""
    loop = asyncio.get_running_loop()
    turn: asyncio.Future[None] = loop.create_future()
    loop.call_soon(turn.set_result, None)
    await turn


class _Server:
    """A ``send`` that, like uvicorn's, waits while the client is not reading, then writes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading = asyncio.Event()
        self.reading.set()
        self.cancelled = False
        self.fail_before_wait: Exception | None = None
        self.fail_after_wait: Exception | None = None

    async def send(self, message: Message) -> None:
        if self.fail_before_wait is not None:
            raise self.fail_before_wait
        if not self.reading.is_set():
            try:
                await self.reading.wait()
            except BaseException:  # cancelled, or closed before the task's first step
                self.cancelled = True
                raise
            if self.fail_after_wait is not None:
                raise self.fail_after_wait
        self.written.append(message["body"])


async def test_a_send_that_does_not_wait_is_done_on_return() -> None:
    server = _Server()

    assert send_now(server.send, BODY) is None
    assert server.written == [b"frame"]


async def test_a_send_that_waits_is_finished_by_a_task_once_the_client_reads() -> None:
    server = _Server()
    server.reading.clear()

    pending = send_now(server.send, BODY)

    assert pending is not None and not pending.done()
    await _after_callbacks_scheduled_now()  # the task's first step: it waits too
    assert server.written == [] and not pending.done()
    server.reading.set()
    await asyncio.wait_for(pending, 5)
    assert server.written == [b"frame"]


@pytest.mark.parametrize("started", [False, True], ids=["at-once", "once-waiting"])
async def test_cancelling_the_task_ends_the_send_where_it_waits(started: bool) -> None:
    server = _Server()
    server.reading.clear()
    pending = send_now(server.send, BODY)
    assert pending is not None
    if started:
        await _after_callbacks_scheduled_now()  # the task's first step

    pending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await pending
    server.reading.set()
    assert server.cancelled and server.written == []


async def test_errors_come_from_the_call_or_from_the_task() -> None:
    server = _Server()
    server.fail_before_wait = OSError("gone")
    with pytest.raises(OSError, match="gone"):
        send_now(server.send, BODY)

    server = _Server()
    server.reading.clear()
    server.fail_after_wait = RuntimeError("closed meanwhile")
    pending = send_now(server.send, BODY)
    assert pending is not None
    server.reading.set()
    with pytest.raises(RuntimeError, match="closed meanwhile"):
        await asyncio.wait_for(pending, 5)


async def test_a_send_that_returns_another_awaitable_runs_as_a_task() -> None:
    written: list[bytes] = []

    def send(message: Message) -> asyncio.Future[None]:
        written.append(message["body"])
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    pending = send_now(send, BODY)

    assert pending is not None
    await asyncio.wait_for(pending, 5)
    assert written == [b"frame"]
