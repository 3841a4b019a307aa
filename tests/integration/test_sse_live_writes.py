"""Live SSE frames written from the subscription hub's dispatch (against a real
Redis): every viewer gets every message once and in order, a viewer that stops
reading holds up no one else and catches up in order, and a viewer that hangs
up while a frame waits for it ends its stream cleanly.

The ASGI client (``tests.integration.sse_responses.SseClient``) waits in
``send`` while it is not reading, as uvicorn's ``send`` does when its flow
control has paused the transport
(docs/streaming/gap-free.md#what-a-live-message-costs-a-gateway).
"""

from __future__ import annotations

import asyncio

import pytest

from spindle.gateway.streams.sse import StreamCursor
from spindle.shared.bus.hub import SubscriptionHub
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, CompactMessage
from tests.integration.sse_responses import SCOPE, SseClient, sse_response
from tests.polling import eventually

pytestmark = [pytest.mark.integration]

LIVE_ONLY = StreamCursor(live_only=True)


async def _post(bus: MessageBus, stream_id: str, first: int, last: int) -> None:
    for n in range(first, last + 1):
        await bus.post(stream_id, CompactMessage(t=AgentMessageType.UPDATE, m=f"message {n}"))


async def _open(
    count: int, stream_id: str, bus: MessageBus, hub: SubscriptionHub
) -> tuple[list[SseClient], list[asyncio.Task[None]]]:
    viewers = [SseClient() for _ in range(count)]
    serving = [
        asyncio.create_task(
            sse_response(stream_id, bus, hub, keepalive=30, cursor=LIVE_ONLY)(
                SCOPE, v.receive, v.send
            )
        )
        for v in viewers
    ]
    await eventually(lambda: all(b"retry:" in v.body for v in viewers), what="every stream is live")
    return viewers, serving


async def _close(viewers: list[SseClient], serving: list[asyncio.Task[None]]) -> None:
    for viewer in viewers:
        viewer.reading.set()
        viewer.hang_up.set()
    await asyncio.wait_for(asyncio.gather(*serving), 10)


async def test_many_viewers_get_every_live_message_once_in_order(
    bus: MessageBus, hub: SubscriptionHub, stream_id: str
) -> None:
    viewers, serving = await _open(50, stream_id, bus, hub)
    try:
        await _post(bus, stream_id, 1, 200)
        await eventually(
            lambda: all(v.seqs[-1:] == [200] for v in viewers), what="every viewer has 200"
        )
        assert all(v.seqs == list(range(1, 201)) for v in viewers)
        assert all(v.status == 200 and not v.finished for v in viewers)
    finally:
        await _close(viewers, serving)


async def test_a_viewer_that_stops_reading_holds_up_no_one_and_catches_up_in_order(
    bus: MessageBus, hub: SubscriptionHub, stream_id: str
) -> None:
    viewers, serving = await _open(3, stream_id, bus, hub)
    slow, others = viewers[0], viewers[1:]
    try:
        await _post(bus, stream_id, 1, 5)
        await eventually(lambda: all(v.seqs[-1:] == [5] for v in viewers), what="all have 5")

        slow.reading.clear()
        await _post(bus, stream_id, 6, 60)
        await eventually(lambda: all(v.seqs[-1:] == [60] for v in others), what="others have 60")
        assert slow.seqs == list(range(1, 6))  # message 6 waits for it, the rest after
        assert slow.waits == 1

        slow.reading.set()
        await eventually(lambda: slow.seqs[-1:] == [60], what="the slow viewer catches up")
        await _post(bus, stream_id, 61, 80)  # live again, after the catch-up
        await eventually(lambda: all(v.seqs[-1:] == [80] for v in viewers), what="all have 80")
        assert all(v.seqs == list(range(1, 81)) for v in viewers)
    finally:
        await _close(viewers, serving)


async def test_a_viewer_that_hangs_up_while_a_frame_waits_ends_its_stream(
    bus: MessageBus, hub: SubscriptionHub, stream_id: str
) -> None:
    viewers, serving = await _open(2, stream_id, bus, hub)
    gone, staying = viewers
    try:
        gone.reading.clear()
        await _post(bus, stream_id, 1, 3)
        await eventually(lambda: staying.seqs[-1:] == [3], what="the other viewer has 3")
        assert gone.waits == 1 and gone.seqs == []

        gone.hang_up.set()
        await asyncio.wait_for(serving[0], 10)
        assert hub.stats()["subscribers"] == 1

        await _post(bus, stream_id, 4, 4)
        await eventually(lambda: staying.seqs[-1:] == [4], what="the other viewer has 4")
        assert gone.seqs == [] and staying.seqs == [1, 2, 3, 4]
    finally:
        await _close(viewers, serving)


async def test_the_message_that_ends_the_run_ends_a_stream_written_live(
    bus: MessageBus, hub: SubscriptionHub, stream_id: str
) -> None:
    viewers, serving = await _open(5, stream_id, bus, hub)
    try:
        await _post(bus, stream_id, 1, 10)
        await bus.post(stream_id, CompactMessage(t=AgentMessageType.COMPLETE, m="done"))
        await asyncio.wait_for(asyncio.gather(*serving), 10)
        assert all(v.seqs == list(range(1, 12)) and v.finished for v in viewers)
        assert hub.stats()["subscribers"] == 0
    finally:
        await _close(viewers, serving)
