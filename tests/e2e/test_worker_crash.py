"""The worker process dies (SIGKILL) mid-run and comes back: the run completes,
and the conversation has every message exactly once, in order."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SpindleStack, example_graph
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

# Activities cut off by the kill are retried once their start-to-close timeout
# passes: keep it short so the test does not wait minutes.
NODE_TIMEOUT_SECONDS = 3


def crash_graph(name: str) -> dict[str, Any]:
    spec = {**example_graph("approval-flow"), "name": name}
    spec["nodes"] = [{**node, "timeout_seconds": NODE_TIMEOUT_SECONDS} for node in spec["nodes"]]
    return spec


async def test_worker_killed_mid_run_loses_and_duplicates_nothing(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    run = await start(
        http, graph_spec=crash_graph(f"crash-{unique}"), input={"topic": "resilience"}
    )
    try:
        async with open_sse(http, run["stream_url"]) as sse:
            await sse.until_type(T.REQUEST_INPUT)

            # Crash 1: while the run waits on a human.
            stack.kill_worker()
            await stack.restart_worker()
            reply = await answer(
                http, run, {"data": {"decision": "approve"}, "client_message_id": "k"}
            )
            assert reply.status_code == 200, reply.text

            # Crash 2: right after the answer, while its activities are in flight.
            stack.kill_worker()
            await stack.restart_worker()

            await sse.read_to_end(timeout=180)
            assert sse.ended
    finally:
        await stack.restart_worker()

    done = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=60)
    assert done["output"]["decision"] == "approve"

    streamed = [e.json() for e in sse.events]
    assert_contiguous(sse.events)
    assert streamed == await updates(http, run)
    kinds = Counter(m["t"] for m in streamed)
    assert kinds[T.REQUEST_INPUT] == 1
    assert kinds[T.QUESTION] == 1
    assert kinds[T.COMPLETE] == 1 and streamed[-1]["t"] == T.COMPLETE
    said = Counter((m.get("i"), m["t"], m.get("m")) for m in streamed if m["t"] != T.RESTARTING)
    assert [key for key, n in said.items() if n > 1] == [], "a message was posted twice"

    # A fresh client replaying the whole conversation sees the same thing.
    async with open_sse(http, run["stream_url"]) as replay:
        events = await replay.read_to_end(timeout=30)
    assert [e.json() for e in events] == streamed
    assert_contiguous(events)
