"""Redis dies (SIGKILL) mid-run and comes back with its append-only file.

The run is waiting for a human when Redis goes away. The answer still reaches
the run (it goes to Temporal), but the activity that accepts it cannot post its
messages: it fails, and Temporal retries it. Once Redis is back, a retry
succeeds: every message appears once, in order, after a RESTARTING notice; an
SSE client whose stream ended with the outage resumes with ``Last-Event-ID``
with no gap and no repeat.
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.faults.conftest import (
    FaultStack,
    approval_graph,
    read_until_dropped,
    resume_to_end,
    wait_ready,
)
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(90)]


async def test_messages_posted_while_redis_is_down_appear_once_in_order(
    fault_stack: FaultStack,
) -> None:
    http, redis = fault_stack.http, fault_stack.redis
    await wait_ready(http)
    run = await start(
        http, graph_spec=approval_graph(f"redis-{uuid.uuid4().hex[:8]}"), input={"topic": "cache"}
    )
    handle = fault_stack.temporal.get_workflow_handle(run["workflow_id"])
    try:
        async with open_sse(http, run["stream_url"]) as sse:
            await sse.until_type(T.REQUEST_INPUT)
            redis.kill()
            # The gateway's live feed is gone: the stream ends so the client resumes.
            await read_until_dropped(sse, timeout=15)
        seen = [*sse.events]

        reply = await answer(
            http, run, {"data": {"decision": "approve"}, "client_message_id": "r1"}
        )
        assert reply.status_code == 200, reply.text

        async def accept_failed_on_redis() -> bool:
            pending = (await handle.describe()).raw_description.pending_activities
            return any(a.activity_id.startswith("review.") and a.attempt >= 2 for a in pending)

        await eventually(
            accept_failed_on_redis,
            what="the activity accepting the answer failed for want of Redis and is retried",
            timeout=20,
            interval=0.1,
        )
    finally:
        if not redis.alive():
            redis.start()

    await wait_ready(http)
    seen += await resume_to_end(http, run["stream_url"], seen[-1].id or "")
    done = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=30)
    assert done["output"]["decision"] == "approve"

    assert_contiguous(seen)
    messages = [e.json() for e in seen]
    assert messages == await updates(http, run), "the client saw exactly what is stored"
    kinds = [m["t"] for m in messages]
    # The retried activity announced itself, then posted what it had to, once.
    restarting = kinds.index(T.RESTARTING)
    assert kinds.count(T.QUESTION) == 1 and kinds.index(T.QUESTION) > restarting
    assert kinds[-1] == T.COMPLETE and kinds.count(T.COMPLETE) == 1
    said = Counter((m.get("i"), m["t"], m.get("m")) for m in messages if m["t"] != T.RESTARTING)
    assert [key for key, n in said.items() if n > 1] == [], "a message was posted twice"
