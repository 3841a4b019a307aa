"""One cursor on SSE: a 1,002-message run read through 100 disconnects at random
points, half while it runs and half after it ended and Redis forgot it (from the
archive), each reconnect resuming from the last seq seen by ``Last-Event-ID``,
``lastEventId`` or ``after``: every seq 1..N arrives exactly once, in order."""

from __future__ import annotations

import random
from contextlib import AbstractAsyncContextManager

import httpx
import pytest

from tests.e2e.conftest import SpindleStack
from tests.e2e.resume_load import (
    DISCONNECTS,
    MESSAGES,
    assert_running,
    disconnect_points,
    end_and_forget,
    read_through_disconnects,
    register_many_messages,
)
from tests.e2e.run_driver import T, start
from tests.e2e.sse_client import SseConnection, open_sse

pytestmark = pytest.mark.e2e


async def test_sse_resumes_through_100_disconnects_live_and_from_the_archive(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    graph = await register_many_messages(http, unique)
    run = await start(http, graph=graph, input={"text": "one two three"})
    workflow_id = run["workflow_id"]
    rng = random.Random(30_5)
    ways: list[str] = []

    def connect(cursor: str | None) -> AbstractAsyncContextManager[SseConnection]:
        if cursor is None:
            return open_sse(http, run["stream_url"])
        # The three spellings of the one cursor, at random.
        way = rng.choice(["Last-Event-ID", "lastEventId", "after"])
        ways.append(way)
        if way == "Last-Event-ID":
            return open_sse(http, run["stream_url"], headers={"Last-Event-ID": cursor})
        return open_sse(http, run["stream_url"], params={way: cursor})

    async def running() -> None:
        await assert_running(http, workflow_id)

    async def ended() -> None:
        await end_and_forget(http, stack, workflow_id)

    reading = await read_through_disconnects(
        connect,
        lambda event: event.id,
        points=disconnect_points(rng, MESSAGES),
        still_running=running,
        after_the_end=ended,
    )

    assert reading.disconnects_during + reading.disconnects_after == DISCONNECTS
    assert reading.disconnects_during == DISCONNECTS // 2
    seqs = [event.seq for event in reading.events]
    assert seqs == list(range(1, MESSAGES + 1)), "no gap, no duplicate, in order"
    assert reading.events[-1].json()["t"] == T.COMPLETE
    assert set(ways) == {"Last-Event-ID", "lastEventId", "after"}
    # At the end, from the archive alone: nothing more to send, and EventSource stops.
    async with open_sse(http, run["stream_url"], headers={"Last-Event-ID": str(MESSAGES)}) as sse:
        assert sse.response.status_code == 204
