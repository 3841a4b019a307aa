"""The worker dies (SIGKILL) during a chat with an interactive agent: no user message
is lost and each is answered once (issue 27, Tests).

Real gateway and worker processes, the offline model (it answers the latest user
message, quoting it). Two crashes: one during the turn that answers a message (its
update accepted, its LLM turn in flight), and one while the agent is idle, with the
next message sent while the worker is down (the gateway answers once the restarted
worker takes it; a 503 "retry" is retried with the same ``client_message_id``).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import T, assert_contiguous, start, wait_for_status
from tests.e2e.sse_client import SseConnection, open_sse
from tests.e2e.test_talking_to_agents import chat_spec, main_of, signal_url

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

WAIT = 90.0
# An LLM turn cut off by the kill is retried once its start-to-close timeout passes.
NODE_TIMEOUT_SECONDS = 3


async def send(http: httpx.AsyncClient, run: dict[str, Any], text: str, cmid: str) -> None:
    """POST the message; while no worker takes it the gateway answers 503 (retry)."""
    for _ in range(10):
        reply = await http.post(signal_url(run), json={"message": text, "client_message_id": cmid})
        if reply.status_code != 503:
            assert reply.status_code == 200, reply.text
            return
    raise AssertionError(f"message {cmid} was never taken: {reply.text}")


async def answered(stream: SseConnection, text: str) -> None:
    """Until the ANSWER quoting ``text`` and the IDLE after it."""
    await stream.until(
        lambda e: main_of(T.ANSWER)(e) and f'"{text}"' in e.json()["m"], timeout=WAIT
    )
    await stream.until(main_of(T.IDLE), timeout=WAIT)


async def test_a_worker_killed_during_a_chat_loses_no_message_and_answers_each_once(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    spec = chat_spec(f"chat-crash-{unique}")
    spec["nodes"] = [{**node, "timeout_seconds": NODE_TIMEOUT_SECONDS} for node in spec["nodes"]]
    run = await start(http, graph_spec=spec, input={"message": "hello"})
    texts = ["first question", "second question", "third question"]
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
    try:
        async with open_sse(http, url) as stream:
            await stream.until(main_of(T.IDLE), timeout=WAIT)

            # Crash 1: the message is taken (its update accepted), its turn in flight.
            await send(http, run, texts[0], "k-0")
            stack.kill_worker()
            await stack.restart_worker()
            await answered(stream, texts[0])

            # Crash 2: idle; the next message is sent while no worker runs.
            stack.kill_worker()
            sending = asyncio.create_task(send(http, run, texts[1], "k-1"))
            await stack.restart_worker()
            await sending
            await answered(stream, texts[1])

            await send(http, run, texts[2], "k-2")
            await answered(stream, texts[2])
            done = await http.post(f"/runs/{run['workflow_id']}/complete")
            assert done.status_code == 200, done.text
            await stream.read_to_end(timeout=WAIT)
    finally:
        await stack.restart_worker()

    described = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=60)
    assert f'"{texts[-1]}"' in str(described["output"])
    assert_contiguous(stream.events)
    streamed = [e.json() for e in stream.events if not e.json().get("w")]
    questions = [m["m"] for m in streamed if m["t"] == T.QUESTION]
    assert questions == texts  # none lost, none twice, in order
    answers = [m["m"] for m in streamed if m["t"] == T.ANSWER]
    for text in ["hello", *texts]:
        assert sum(f'"{text}"' in a for a in answers) == 1, (text, answers)
    said = Counter((m.get("i"), m["t"], m.get("m")) for m in streamed if m["t"] != T.RESTARTING)
    assert [key for key, n in said.items() if n > 1] == [], "a message was posted twice"
