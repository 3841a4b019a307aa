"""A waiting agent's answer is found back from the stream's end, in growing pages,
however many other workstreams' messages follow it (docs/protocols/a2a.md, "How a read
knows"), against real Redis."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest

from spindle.gateway.models import RunDetail
from spindle.gateway.protocols.a2a.run_events import WAIT_READ_FIRST, idle_wait
from spindle.gateway.protocols.a2a.task_mapping import status_text
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message

pytestmark = pytest.mark.integration


class CountingBus:
    """The real bus, counting the tail reads a wait lookup makes."""

    def __init__(self, bus: MessageBus) -> None:
        self.bus = bus
        self.reads: list[int] = []

    async def tail(self, stream_id: str, count: int) -> Any:
        self.reads.append(count)
        return await self.bus.tail(stream_id, count)


async def test_tail_reads_the_last_messages_with_their_seqs(bus: MessageBus) -> None:
    stream = f"tail-{uuid.uuid4().hex[:8]}"
    for n in range(10):
        await bus.post(stream, create_compact_message(T.UPDATE, f"m{n}"))
    last, whole = await bus.tail(stream, 3)
    assert [m.seq for m in last] == [8, 9, 10] and not whole
    assert b'"m9"' in last[-1].raw
    every, whole = await bus.tail(stream, 100)
    assert [m.seq for m in every] == list(range(1, 11)) and whole
    assert await bus.tail(f"none-{uuid.uuid4().hex[:8]}", 5) == ([], True)


async def test_a_wait_behind_hundreds_of_workstream_messages_is_found(bus: MessageBus) -> None:
    stream = f"wait-{uuid.uuid4().hex[:8]}"
    await bus.post(stream, create_compact_message(T.ANSWER, "forty-two"))
    idle = await bus.post(
        stream, create_compact_message(T.IDLE, "waiting", details={"node_id": "assistant"})
    )
    behind = WAIT_READ_FIRST * 4 + 5  # past the first two pages
    await bus.post_many(
        stream,
        [
            (create_compact_message(T.UPDATE, f"child {n}", workstream_id="ws-1"), None)
            for n in range(behind)
        ],
    )
    counting = CountingBus(bus)
    caller = cast(Any, SimpleNamespace(state=SimpleNamespace(bus=counting)))
    detail = RunDetail(workflow_id=stream, status="running", awaiting_message=["assistant"])

    found = await idle_wait(caller, detail)
    assert found is not None and status_text(found) == "forty-two"
    assert found.status.message.message_id == f"{stream}-idle-{idle.seq}"
    # Growing pages, never the whole stream at once unless it must.
    assert counting.reads == [WAIT_READ_FIRST * 4**k for k in range(3)]

    # Right after the IDLE, one page is enough.
    near = f"wait-{uuid.uuid4().hex[:8]}"
    await bus.post(near, create_compact_message(T.ANSWER, "seven"))
    await bus.post(near, create_compact_message(T.IDLE, "waiting", details={"node_id": "a"}))
    counting.reads.clear()
    found = await idle_wait(
        caller, RunDetail(workflow_id=near, status="running", awaiting_message=["a"])
    )
    assert found is not None and status_text(found) == "seven"
    assert counting.reads == [WAIT_READ_FIRST]
