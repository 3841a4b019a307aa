"""One cursor on A2A: a 1,002-message run started with ``SendStreamingMessage`` and
read through 100 disconnects at random points, half while it runs and half after
it ended and Redis forgot it (from the archive), each reconnect a
``SubscribeToTask`` with ``A2A-Last-Event-ID`` (the Spindle resume extension,
docs/protocols/a2a.md#resume-by-cursor) set to the last ``spindle.eventId`` seen:
every event arrives once, in order, and together they carry every seq 1..N."""

from __future__ import annotations

import random
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import orjson
import pytest

from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.resume_load import (
    DISCONNECTS,
    MESSAGES,
    assert_running,
    disconnect_points,
    end_and_forget,
    post_sse,
    read_through_disconnects,
    register_many_messages,
)
from tests.e2e.sse_client import SseConnection, SseEvent

pytestmark = pytest.mark.e2e

V1 = {"A2A-Version": "1.0"}


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": method, "method": method, "params": params}


def result(event: SseEvent) -> dict[str, Any]:
    body: dict[str, Any] = orjson.loads(event.data)
    assert "error" not in body, body
    answer: dict[str, Any] = body["result"]
    return answer


def update(event: SseEvent) -> dict[str, Any] | None:
    """The status or artifact update of a stream event (None: the Task)."""
    answer = result(event)
    found: dict[str, Any] | None = answer.get("statusUpdate") or answer.get("artifactUpdate")
    return found


def event_id(event: SseEvent) -> str | None:
    found = update(event)
    return None if found is None else str(found["metadata"]["spindle.eventId"])


def as_pair(value: str) -> tuple[int, int]:
    seq, _, index = value.partition(".")
    return int(seq), int(index)


async def test_a2a_resubscribes_by_cursor_through_100_disconnects_live_and_archived(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient, unique: str
) -> None:
    graph = await register_many_messages(http, unique)
    alice = {**callers["alice"].headers, **V1}
    message = {
        "messageId": f"m-{unique}",
        "role": "ROLE_USER",
        "parts": [{"data": {"text": "one two three"}, "mediaType": "application/json"}],
        "metadata": {"graph": graph},
    }
    task: dict[str, str] = {}

    def connect(cursor: str | None) -> AbstractAsyncContextManager[SseConnection]:
        if cursor is None:
            return post_sse(http, "/", rpc("SendStreamingMessage", {"message": message}), alice)
        headers = {**alice, "A2A-Last-Event-ID": cursor}
        return post_sse(http, "/", rpc("SubscribeToTask", {"id": task["id"]}), headers)

    def cursor_of(event: SseEvent) -> str | None:
        answer = result(event)
        if "task" in answer:
            task.setdefault("id", answer["task"]["id"])
        return event_id(event)

    async def running() -> None:
        await assert_running(http, task["id"])

    async def ended() -> None:
        await end_and_forget(http, stack, task["id"])

    rng = random.Random(30_5)
    reading = await read_through_disconnects(
        connect,
        cursor_of,
        # Each reconnect's first event is the Task (no cursor): points count every event.
        points=disconnect_points(rng, MESSAGES),
        still_running=running,
        after_the_end=ended,
    )

    assert reading.disconnects_during + reading.disconnects_after == DISCONNECTS
    ids = [as_pair(i) for i in (event_id(e) for e in reading.events) if i is not None]
    assert len(ids) == len(set(ids)), "no event twice"
    assert ids == sorted(ids), "in order"
    assert sorted({seq for seq, _ in ids}) == list(range(1, MESSAGES + 1)), "no message missed"
    last = update(reading.events[-1])
    assert last is not None and last["status"]["state"] == "TASK_STATE_COMPLETED"

    # The same cursor from the start, after the end: exactly the events read above.
    headers = {**alice, "A2A-Last-Event-ID": "0"}
    async with post_sse(http, "/", rpc("SubscribeToTask", {"id": task["id"]}), headers) as sse:
        replay = [i for i in (event_id(e) for e in await sse.read_to_end(timeout=60)) if i]
    assert [as_pair(i) for i in replay] == ids
    # From the last event, from the archive alone: the task, and the stream ends.
    headers = {**alice, "A2A-Last-Event-ID": "{}.{}".format(*ids[-1])}
    async with post_sse(http, "/", rpc("SubscribeToTask", {"id": task["id"]}), headers) as sse:
        (only,) = await sse.read_to_end(timeout=30)
    assert result(only)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
