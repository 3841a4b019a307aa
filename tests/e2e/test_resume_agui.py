"""One cursor on AG-UI: a 1,002-message run (3,005 AG-UI events) read through 100
disconnects at random points, half while it runs and half after it ended and
Redis forgot it (from the archive), each reconnect the same ``RunAgentInput``
with ``Last-Event-ID`` set to the last event id seen (``<seq>.<k>``): every
event arrives once, in order, every event validates against ``ag-ui-protocol``,
and together they carry every seq 0..N. A cursor past this AG-UI run's events
or past the run's end is a RUN_ERROR with its code."""

from __future__ import annotations

import random
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

from tests.e2e.conftest import SpindleStack
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

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)
# RUN_STARTED and STATE_SNAPSHOT, then per node visit STEP_STARTED, per UPDATE a
# CUSTOM and a STATE_DELTA, STEP_FINISHED, and the closing events.
EXPECTED_EVENTS = 3000


def pair(event_id: str | None) -> tuple[int, int]:
    assert event_id is not None
    seq, _, index = event_id.partition(".")
    return int(seq), int(index)


async def one_run_error(
    http: httpx.AsyncClient, url: str, body: dict[str, Any], cursor: str
) -> Any:
    """The RUN_ERROR a reconnect from ``cursor`` gets (its stream has nothing else)."""
    async with post_sse(http, url, body, {"Last-Event-ID": cursor}) as sse:
        assert sse.response.status_code == 200
        events = await sse.read_to_end(timeout=60)
    assert [e.json()["type"] for e in events] == ["RUN_ERROR"], [e.data for e in events]
    return events[0].json()


async def test_agui_reconnects_by_event_id_through_100_disconnects_live_and_archived(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    graph = await register_many_messages(http, unique)
    url = f"/agui/{graph}"
    body = {
        "threadId": f"t-{unique}",
        "runId": "r1",
        "messages": [],
        "forwardedProps": {"input": {"text": "one two three"}},
    }
    run: dict[str, str] = {}

    def connect(cursor: str | None) -> AbstractAsyncContextManager[SseConnection]:
        return post_sse(http, url, body, {} if cursor is None else {"Last-Event-ID": cursor})

    def cursor_of(event: SseEvent) -> str | None:
        EVENTS.validate_python(event.json())
        snapshot = event.json().get("snapshot")
        if isinstance(snapshot, dict) and "workflowId" in snapshot:
            run.setdefault("workflow_id", snapshot["workflowId"])
        return event.id

    async def running() -> None:
        await assert_running(http, run["workflow_id"])

    async def ended() -> None:
        await end_and_forget(http, stack, run["workflow_id"])

    reading = await read_through_disconnects(
        connect,
        cursor_of,
        points=disconnect_points(random.Random(30_5), EXPECTED_EVENTS),
        still_running=running,
        after_the_end=ended,
    )

    assert reading.disconnects_during + reading.disconnects_after == DISCONNECTS
    ids = [pair(e.id) for e in reading.events]
    assert len(ids) == len(set(ids)), "no event twice"
    assert ids == sorted(ids), "in order"
    assert sorted({seq for seq, _ in ids}) == list(range(MESSAGES + 1)), "no message missed"
    kinds = [e.json()["type"] for e in reading.events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert kinds.count("RUN_STARTED") == 1, "a reconnect does not start the run again"

    # The same segment read whole, after the end: exactly the events read above.
    async with post_sse(http, url, body, {}) as sse:
        whole = await sse.read_to_end(timeout=60)
    assert [pair(e.id) for e in whole] == ids
    assert [e.data for e in whole] == [e.data for e in reading.events]

    # Cursors this AG-UI run cannot serve are RUN_ERRORs naming why.
    last_seq, last_index = ids[-1]
    past = await one_run_error(http, url, body, f"{last_seq}.{last_index + 5}")
    assert past["code"] == "CURSOR_NOT_IN_RUN", past
    beyond = await one_run_error(http, url, body, f"{MESSAGES + 100}.0")
    assert beyond["code"] == "CURSOR_BEYOND_END", beyond
    assert beyond["metadata"]["lastSeq"] == MESSAGES
