"""``GET /updates`` over HTTP: streamed chunks compacted to the final message.

A real run (the approval example, paused at its prompt) gets an LLM turn's
messages on its stream; the history a client loads leaves out the chunks its
ANSWER superseded, keeps those of a stream still under way, and serves the
stored log whole with ``compact=false``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import create_compact_message
from spindle.shared.platform.settings import Settings
from tests.e2e.run_driver import answer, start, updates, wait_for_status

pytestmark = pytest.mark.e2e


@pytest.fixture
async def bus(e2e_settings: Settings) -> AsyncIterator[MessageBus]:
    message_bus = MessageBus.from_settings(e2e_settings)
    yield message_bus
    await message_bus.close()


async def test_history_leaves_out_superseded_chunks(
    http: httpx.AsyncClient, bus: MessageBus, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "streaming"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    before = await updates(http, run)
    for message in [
        create_compact_message(T.STREAMING_CHUNK, "The bud", activity_id="t.1"),
        create_compact_message(T.STREAMING_CHUNK, "get", activity_id="t.1", final=True),
        create_compact_message(T.ANSWER, "The budget", activity_id="t.1"),
        create_compact_message(T.STREAMING_CHUNK, "Next", activity_id="t.2"),
    ]:
        assert not (await bus.post(run["workflow_id"], message)).closed

    compacted = await updates(http, run)
    assert compacted[: len(before)] == before
    assert [(m["t"], m.get("m")) for m in compacted[len(before) :]] == [
        (T.ANSWER, "The budget"),
        (T.STREAMING_CHUNK, "Next"),  # still streaming: kept
    ]

    url = f"/runs/{run['workflow_id']}/{run['run_id']}/updates"
    full = (await http.get(url, params={"compact": "false"})).json()["messages"]
    assert [m.get("m") for m in full[len(before) :]] == ["The bud", "get", "The budget", "Next"]
    # The same messages, byte for byte, where both have them.
    assert [m for m in full if m in compacted] == compacted

    bad = await http.get(url, params={"compact": "sometimes"})
    assert bad.status_code == 422
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert "compact" in bad.text

    reply = await answer(http, run, {"data": {"decision": "reject"}})
    assert reply.status_code == 200, reply.text
    await wait_for_status(http, run["workflow_id"], {"completed", "failed"})
