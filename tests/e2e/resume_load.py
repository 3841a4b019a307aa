"""A run of 1,000+ messages read through 100 disconnects: what the resume tests share.

The run is a loop of two ``tool`` nodes (``fetch`` -> ``count`` -> ``fetch`` …),
each visit posting a "calling" and a "returned" UPDATE: ``4 * (ITERATIONS + 1)``
UPDATEs plus the run's first and last messages, 1,002 in all, in about ten
seconds on the e2e stack. A reader connects, reads a random number of events
(seeded), disconnects and reconnects from the last cursor it saw: half of the
disconnects while the run goes on, the rest after it ended, once Redis forgot
the run (every message then comes from the archive).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import httpx
import redis.asyncio as aioredis

from spindle.shared.store.archive import RunArchive
from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import wait_for_status
from tests.e2e.sse_client import SseConnection, SseEvent, StreamEnded
from tests.polling import eventually

ITERATIONS = 249
MESSAGES = 4 * (ITERATIONS + 1) + 2
DISCONNECTS = 100
# Events read per connection: 1 to 2 * MEAN, so that 100 connections cover the run.
MEAN_PER_CONNECTION = 10


def many_messages_graph(name: str, iterations: int = ITERATIONS) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "fetch",
        "nodes": [
            {
                "id": "fetch",
                "type": "tool",
                "max_visits": iterations + 1,
                "params": {"tool": "word_count", "args": {"text": "{{ input.text }}"}},
            },
            {
                "id": "count",
                "type": "tool",
                "max_visits": iterations + 1,
                "inputs": {"args": "{text: input.text}"},
                "params": {"tool": "word_count"},
            },
        ],
        "edges": [
            {"from": "fetch", "to": "count"},
            {"from": "count", "to": "fetch", "max_iterations": iterations},
        ],
    }


async def register_many_messages(http: httpx.AsyncClient, unique: str) -> str:
    """Register the loop graph under a name of its own; returns the name."""
    name = f"resume-many-{unique}"
    reply = await http.put(f"/graphs/{name}", json=many_messages_graph(name))
    assert reply.status_code in (200, 201), reply.text
    return name


async def forget_in_redis(stack: SpindleStack, workflow_id: str, total: int) -> None:
    """Once the archive holds all ``total`` messages, drop the run's Redis keys
    (as their TTL would): from here on every message comes from the archive."""
    archive = RunArchive.from_settings(stack.settings)
    try:

        async def archived() -> bool:
            return len(await archive.messages(workflow_id)) == total

        await eventually(archived, what=f"{total} messages archived", timeout=60, interval=0.2)
    finally:
        await archive.close()
    redis = aioredis.Redis.from_url(stack.settings.redis_url)
    try:
        keys = [k async for k in redis.scan_iter(match=f"spindle:{{{workflow_id}}}:*")]
        assert keys
        await redis.delete(*keys)
    finally:
        await redis.aclose()


Connect = Callable[[str | None], AbstractAsyncContextManager[SseConnection]]
"""Opens the stream after a cursor (None: the first connection)."""


def disconnect_points(
    rng: random.Random, expected: int, *, after: int = DISCONNECTS // 2
) -> tuple[list[int], list[int]]:
    """``DISCONNECTS`` positions (events read so far) at which the reader hangs up:
    ``DISCONNECTS - after`` in the first 40 % of the stream (while the run goes on),
    ``after`` in the rest (once it ended).

    Args:
        expected: how many events the whole stream has (at least).
    """
    split = int(expected * 0.4)
    during = sorted(rng.sample(range(1, split), DISCONNECTS - after))
    later = sorted(rng.sample(range(split + 1, expected), after))
    return during, later


@dataclass
class Reading:
    """What a reader got over all its connections."""

    events: list[SseEvent] = field(default_factory=list)
    connections: int = 0
    disconnects_during: int = 0
    disconnects_after: int = 0
    statuses: list[int] = field(default_factory=list)


async def read_through_disconnects(
    connect: Connect,
    cursor_of: Callable[[SseEvent], str | None],
    *,
    points: tuple[list[int], list[int]],
    still_running: Callable[[], Any],
    after_the_end: Callable[[], Any],
) -> Reading:
    """Read the whole stream, hanging up at every point and resuming from the cursor.

    Args:
        cursor_of: the cursor an event leaves the reader at (None: it carries none).
        still_running: awaited at the last disconnect of the first half: asserts
            that the run is still going.
        after_the_end: awaited before the second half: waits for the run's end
            (and makes Redis forget it).
    """
    during, after = points
    reading = Reading()
    cursor: str | None = None
    for phase, stops in (("during", during), ("after", after), ("end", [])):
        if phase == "after":
            await after_the_end()
        for stop in [*stops, None]:
            if stop is None and phase != "end":
                break
            reading.connections += 1
            async with connect(cursor) as sse:
                reading.statuses.append(sse.response.status_code)
                assert sse.response.status_code == 200, await sse.response.aread()
                with contextlib.suppress(StreamEnded):
                    while stop is None or len(reading.events) < stop:
                        event = await sse.next_event(timeout=60)
                        reading.events.append(event)
                        cursor = cursor_of(event) or cursor
                if stop is not None:
                    assert not sse.ended, f"the stream ended before event {stop}"
            if stop is not None and phase == "during":
                reading.disconnects_during += 1
                if reading.disconnects_during == len(during):
                    await still_running()
            elif stop is not None:
                reading.disconnects_after += 1
    return reading


@contextlib.asynccontextmanager
async def post_sse(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]
) -> AsyncIterator[SseConnection]:
    """A POST whose answer is an SSE stream (AG-UI, A2A JSON-RPC streaming)."""
    request_headers = {"Accept": "text/event-stream", **headers}
    async with http.stream("POST", url, json=body, headers=request_headers) as response:
        yield SseConnection(response)


async def assert_running(http: httpx.AsyncClient, workflow_id: str) -> None:
    reply = await http.get(f"/runs/{workflow_id}")
    assert reply.json()["status"] == "running", "the first half of the disconnects is mid-run"


async def end_and_forget(http: httpx.AsyncClient, stack: SpindleStack, workflow_id: str) -> None:
    await wait_for_status(http, workflow_id, {"completed"}, timeout=90)
    await forget_in_redis(stack, workflow_id, MESSAGES)
