"""The chat section: a conversation with an interactive agent, against a bare Update.

One interactive agent (the offline model, the calculator offered) on the real
worker; each message is the ``user_message`` update, sent once the IDLE after
the previous answer is on the run's live channel (``tests.chat_driver``). Figures:

- ``to_first_chunk_ms`` / ``to_answer_ms``: user message sent → its first
  STREAMING_CHUNK / its ANSWER on the live channel (medians; the offline model
  paced at ``TOKEN_DELAY_MS`` a token so that it streams), and the update's own round trip, each
  against a bare Temporal Update round trip (``BareUpdates``, the same server);
- ``first_100_ms`` / ``last_100_ms``: message → IDLE, medians of the first and the
  last 100 messages of a chat of ``messages`` (unpaced model, no archive, a
  1,000-token window: ``LONG_CHAT_CONTEXT``), and the
  generations and largest history (events) of one generation;
- ``history_bytes_at_100`` / ``history_bytes_at_end``: the history bytes one
  exchange adds (from its update's acceptance to the next one's; every
  generation's history read back from Temporal), mean of messages 51-150 and of
  the last 100;
- ``summarize``: message → IDLE of the turns that wrote a summary
  (``params.context`` ``{"max_tokens": 256, "strategy": "summarize"}``: the offline
  model writes it, so this is Spindle's cost of the step, not a model's) against
  the turns that did not, and against a ``window`` chat of the same messages.
"""

from __future__ import annotations

import statistics
import uuid
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import USER_MESSAGE_UPDATE
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from spindle.worker.replay.histories import fetch_generations
from tests.bench.hitl import _bare_update_ms
from tests.chat_driver import Exchange, chat_agent_graph, start_chat

LONG_CHAT_CONTEXT = {"max_tokens": 1000, "strategy": "window"}
"""The long chat's window: full within its first 100 messages, so the first and the
last 100 compare what the chat's length costs, not a growing prompt (the default
100,000-token window fills up only after some 4,000 messages)."""
WARM = 5
"""Messages sent before any is timed (the sandbox, caches)."""
TOKEN_DELAY_MS = 5.0
"""The offline model's pace in the latency part: a reply of ~9 tokens outlasts the
chunk batcher's 16 ms window, so it streams (an unpaced reply posts no chunk)."""


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


async def _chat(
    client: Client,
    settings: Settings,
    task_queue: str,
    texts: list[str],
    **params: Any,
) -> tuple[list[Exchange], str, str]:
    """Hold a chat of ``texts`` on a worker of its own; the exchanges, workflow id
    and first run id."""
    bus = MessageBus.from_settings(settings)
    try:
        async with build_worker(client, settings, bus=bus, archive=None, task_queue=task_queue):
            driver, _ = await start_chat(
                client,
                chat_agent_graph(f"bench-chat-{uuid.uuid4().hex[:6]}", **params),
                task_queue,
                redis_url=settings.redis_url,
            )
            try:
                exchanges = [await driver.say(text) for text in texts]
                await driver.complete()
            finally:
                await driver.close()
    finally:
        await bus.close()
    return exchanges, driver.workflow_id, driver.first_run_id


async def _latency(client: Client, settings: Settings, samples: int) -> dict[str, Any]:
    """Message → first chunk / ANSWER, with the deployed archive, paced model."""
    paced = settings.model_copy(update={"offline_token_delay_ms": TOKEN_DELAY_MS})
    bus = MessageBus.from_settings(paced)
    archive = RunArchive.from_settings(paced)
    await archive.ensure_indexes()
    texts = [f"tell me about topic {n}" for n in range(WARM + samples)]
    try:
        async with build_worker(
            client, paced, bus=bus, archive=archive, task_queue="bench-chat-latency"
        ):
            driver, _ = await start_chat(
                client,
                chat_agent_graph("bench-chat-latency"),
                "bench-chat-latency",
                redis_url=paced.redis_url,
            )
            try:
                exchanges = [await driver.say(text) for text in texts][WARM:]
                await driver.complete()
            finally:
                await driver.close()
    finally:
        await bus.close()
        await archive.close()
    floor = statistics.median(await _bare_update_ms(client, samples))
    chunks = [e.first_chunk_ms for e in exchanges if e.first_chunk_ms is not None]
    chunk = _median(chunks) if chunks else None
    answer = _median([e.answer_ms for e in exchanges if e.answer_ms is not None])
    update = _median([e.update_ms for e in exchanges])
    return {
        "samples": len(exchanges),
        "chunked": len(chunks),
        "token_delay_ms": TOKEN_DELAY_MS,
        "bare_update_ms": round(floor, 2),
        "message_update_ms": update,
        "to_first_chunk_ms": chunk,
        "to_answer_ms": answer,
        "update_ratio": round(update / floor, 2),
        "first_chunk_ratio": round(chunk / floor, 2) if chunk is not None else None,
        "answer_ratio": round(answer / floor, 2),
    }


def exchange_bytes(histories: list[WorkflowHistory]) -> list[int]:
    """History bytes per user message: from its update's acceptance to the next one's
    (the opening and the end are left out)."""
    sizes: list[int] = []
    current: int | None = None
    for history in histories:
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
                request = event.workflow_execution_update_accepted_event_attributes
                if request.accepted_request.input.name == USER_MESSAGE_UPDATE:
                    if current is not None:
                        sizes.append(current)
                    current = 0
            if current is not None:
                current += event.ByteSize()
    return sizes


async def _long_chat(client: Client, settings: Settings, messages: int) -> dict[str, Any]:
    texts = [f"message number {n}" for n in range(messages)]
    exchanges, workflow_id, first_run = await _chat(
        client, settings, "bench-chat-long", texts, context=LONG_CHAT_CONTEXT
    )
    assert all(len(e.answers) == 1 for e in exchanges), "a message not answered once"
    histories = await fetch_generations(client, workflow_id, first_run)
    per_message = [e.idle_ms for e in exchanges]
    first, last = _median(per_message[:100]), _median(per_message[-100:])
    sizes = exchange_bytes(histories)
    at_100 = statistics.mean(sizes[50:150])
    at_end = statistics.mean(sizes[-100:])
    return {
        "messages": messages,
        "generations": len(histories),
        "max_events_per_generation": max(len(h.events) for h in histories),
        "first_100_ms": first,
        "last_100_ms": last,
        "time_ratio": round(last / first, 2),
        "history_bytes_at_100": round(at_100),
        "history_bytes_at_end": round(at_end),
        "history_bytes_ratio": round(at_end / at_100, 3),
    }


async def _summarize(client: Client, settings: Settings, messages: int) -> dict[str, Any]:
    texts = [f"please remember that item {n} is worth {n * 7} points" for n in range(messages)]
    timed: dict[str, list[Exchange]] = {}
    for strategy in ("window", "summarize"):
        exchanges, _, _ = await _chat(
            client,
            settings,
            f"bench-chat-{strategy}",
            texts,
            context={"max_tokens": 256, "strategy": strategy},
        )
        timed[strategy] = exchanges[WARM:]
    summarized = [e.idle_ms for e in timed["summarize"] if e.updates]
    plain = [e.idle_ms for e in timed["summarize"] if not e.updates]
    window = _median([e.idle_ms for e in timed["window"]])
    if not summarized:
        return {"messages": messages, "summary_turns": 0, "window_turn_ms": window}
    turn, other = _median(summarized), _median(plain)
    return {
        "messages": messages,
        "summary_turns": len(summarized),
        "summary_turn_ms": turn,
        "plain_turn_ms": other,
        "window_turn_ms": window,
        "summary_vs_plain": round(turn / other, 2),
        "summary_vs_window": round(turn / window, 2),
    }


async def bench_chat(
    client: Client, settings: Settings, *, messages: int, samples: int = 50
) -> dict[str, Any]:
    """The chat section's figures (see the module docstring)."""
    return {
        **await _latency(client, settings, samples),
        **await _long_chat(client, settings, messages),
        "summarize": await _summarize(client, settings, 80),
    }
