"""A chat of 10,000 messages completes with every message answered once, in order,
history per generation bounded, and the time per message flat (issue 27, item 6).

One interactive agent (the offline model, which quotes the message it answers) on
the dev server with the real worker. Each message is the ``user_message`` update,
sent once the IDLE after the previous answer is on the run's live channel
(``tests.chat_driver``). The idle run continues as new when Temporal suggests it,
so no generation's history nears Temporal's limit (51,200 events).
"""

from __future__ import annotations

import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import RunStatus
from spindle.shared.platform.settings import Settings
from spindle.worker.main import build_worker
from spindle.worker.replay.histories import fetch_generations
from tests.chat_driver import chat_agent_graph, quoted, start_chat

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

MESSAGES = int(os.environ.get("SPINDLE_LONG_CHAT_MESSAGES", "10000"))
EVENTS_PER_GENERATION = 6000
"""Bound asserted on every generation: Temporal suggests continuing as new at 4,096
events (``limit.historyCount.suggestContinueAsNew``); what is left of the exchange
in flight when it does, and a handover postponed by a message, stay well under it."""
CONTEXT = {"max_tokens": 1000, "strategy": "window"}
"""What the model is given per turn. The default window (100,000 tokens) fills up
only after some 4,000 of these messages, and until then every turn sends more: the
per-message time grows with the prompt, by design, up to that cap. A small window is
full within the first 100 messages, so what the comparison below sees is what the
chat's length itself costs (history, store, continue-as-new)."""
SLOWDOWN = 4.0
"""Generous sanity bound on the median time of the last 100 messages against the
first 100 (a history or a prompt growing with the chat shows as a far larger ratio;
the benchmark's ``chat`` section reports the figure)."""


@pytest.fixture(scope="module")
async def chat_worker(temporal_client: Client, settings: Settings) -> AsyncIterator[str]:
    """The real worker without the archive (not what is measured here)."""
    bus = MessageBus.from_settings(settings)
    task_queue = f"long-chat-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=None, task_queue=task_queue
        ):
            yield task_queue
    finally:
        await bus.close()


async def test_ten_thousand_messages_each_answered_once_with_bounded_history(
    temporal_client: Client, settings: Settings, chat_worker: str
) -> None:
    driver, opening = await start_chat(
        temporal_client,
        chat_agent_graph(context=CONTEXT),
        chat_worker,
        redis_url=settings.redis_url,
    )
    assert len(opening.answers) == 1 and quoted("hello", opening.answers[0])
    texts = [f"message number {n}" for n in range(MESSAGES)]
    per_message: list[float] = []
    started = time.monotonic()
    try:
        for n, text in enumerate(texts):
            exchange = await driver.say(text, client_message_id=f"m-{n}")
            # Answered once, before the next message is sent: in order.
            assert len(exchange.answers) == 1, (n, exchange.answers)
            assert quoted(text, exchange.answers[0]), (n, exchange.answers[0])
            per_message.append(exchange.idle_ms)
        result = await driver.complete()
    finally:
        await driver.close()
    elapsed = time.monotonic() - started

    assert result.status is RunStatus.COMPLETED
    assert quoted(texts[-1], str(result.output))
    assert driver.questions == texts  # each echoed once, in order
    assert result.generation >= 2

    histories = await fetch_generations(temporal_client, driver.workflow_id, driver.first_run_id)
    assert len(histories) == result.generation
    events = [len(h.events) for h in histories]
    first, last = (statistics.median(per_message[s]) for s in (slice(0, 100), slice(-100, None)))
    print(
        f"\n{MESSAGES} messages in {elapsed:.1f}s, {result.generation} generations, "
        f"events per generation max {max(events)} (first {events[0]}); "
        f"ms per message: first 100 median {first:.1f}, last 100 median {last:.1f}"
    )
    assert max(events) <= EVENTS_PER_GENERATION
    assert last <= SLOWDOWN * first
