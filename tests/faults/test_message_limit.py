"""A run that posts a message larger than ``max_message_bytes`` does not fail:
the message is stored cut to the limit, marked, and the next ones follow."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as aioredis

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType
from spindle.worker.contracts import RunRef
from spindle.worker.posting.poster import MessagePoster

pytestmark = pytest.mark.integration

LIMIT = 2048


@pytest.fixture
async def bus(redis_url: str) -> AsyncIterator[MessageBus]:
    message_bus = MessageBus(aioredis.Redis.from_url(redis_url, decode_responses=False))
    yield message_bus
    await message_bus.close()


async def test_an_oversized_message_is_stored_cut_and_marked(bus: MessageBus) -> None:
    stream = f"limit-{uuid.uuid4().hex[:10]}"
    run = RunRef(workflow_id=stream, run_id="r", stream_id=stream, graph_name="g")
    poster = MessagePoster(bus, run, activity_id="big.1", attempt=1, max_message_bytes=LIMIT)
    text = "Ünïcödé " * 2000  # ~20 KB of two-byte characters

    big = await poster.post(AgentMessageType.ANSWER, text, details={"node_id": "big"})
    after = await poster.post(AgentMessageType.UPDATE, "still going")

    stored = await bus.history(stream)
    assert [m.seq for m in stored] == [big.seq, after.seq]
    assert len(stored[0].raw) <= LIMIT
    message = orjson.loads(stored[0].raw)
    found = re.search(r"… \[truncated (\d+) bytes\]$", message["m"])
    assert found, message["m"][-80:]
    kept = message["m"][: found.start()]
    assert text.startswith(kept) and len(kept) > LIMIT // 4
    assert int(found.group(1)) == len(text.encode()) - len(kept.encode())
    assert message["d"] == {"node_id": "big"}
    assert orjson.loads(stored[1].raw)["m"] == "still going"
