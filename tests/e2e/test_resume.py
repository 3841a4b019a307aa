"""A client that drops its SSE connection and comes back gets every message
exactly once: by ``Last-Event-ID`` (EventSource) or by ``since`` (seed 002's
two-phase client: GET /updates, then SSE with since/skipHistory)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis

from spindle.dev.processes import wait_until
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import SseEvent, open_sse

pytestmark = pytest.mark.e2e


async def _answer_and_finish(http: httpx.AsyncClient, run: dict[str, Any]) -> None:
    reply = await answer(http, run, {"data": {"decision": "approve"}})
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("cursor", ["header", "query"])
async def test_reconnect_with_last_event_id_loses_and_repeats_nothing(
    http: httpx.AsyncClient, examples: list[str], cursor: str
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "offsite"})
    seen: list[SseEvent] = []

    # First connection: take two messages, then drop the connection mid-run.
    async with open_sse(http, run["stream_url"]) as sse:
        seen.append(await sse.next_event())
        seen.append(await sse.next_event())
    assert_contiguous(seen)

    # Second connection resumes after the last id, sees the prompt, answers it,
    # and then drops again before the end.
    def resume() -> dict[str, Any]:
        last = seen[-1].id or ""
        if cursor == "header":
            return {"headers": {"Last-Event-ID": last}}
        return {"params": {"lastEventId": last}}

    async with open_sse(http, run["stream_url"], **resume()) as sse:
        ask = await sse.until_type(T.REQUEST_INPUT)
        seen.extend(sse.events)
        assert ask in seen
        await _answer_and_finish(http, run)
        seen.append(await sse.next_event())

    # Third connection reads to the end of the conversation.
    async with open_sse(http, run["stream_url"], **resume()) as sse:
        seen.extend(await sse.read_to_end(timeout=60))
        assert sse.ended

    assert_contiguous(seen)
    messages = [e.json() for e in seen]
    assert messages[-1]["t"] == T.COMPLETE
    assert messages == await updates(http, run), "the client saw exactly the stored history"


async def test_two_phase_client_with_since_and_skip_history(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    """What @vertesia/client does: history first, then SSE from the last ts."""
    run = await start(http, graph="approval-flow", input={"topic": "roadmap"})
    wf = run["workflow_id"]
    await wait_for_status(http, wf, {"paused"})

    received = await updates(http, run)  # phase 1
    assert received[-1]["t"] == T.REQUEST_INPUT
    last_ts = max(m["ts"] for m in received)

    params = {"since": last_ts, "skipHistory": "true", "access_token": "secret-token-123"}
    async with open_sse(http, run["stream_url"], params=params) as sse:  # phase 2
        await _answer_and_finish(http, run)
        first = await sse.next_event()
        assert first.json()["ts"] > last_ts
        received.append(first.json())
        # The client drops the stream and resumes like the npm client: since=<last ts>.
        last_ts = first.json()["ts"]
    params["since"] = last_ts
    async with open_sse(http, run["stream_url"], params=params) as sse:
        received.extend(e.json() for e in await sse.read_to_end(timeout=60))

    assert received == await updates(http, run)
    assert received[-1]["t"] == T.COMPLETE

    since_page = await updates(http, run, since=received[2]["ts"])
    assert since_page == received[3:], "GET /updates?since keeps ts > since"


async def test_live_only_stream_sends_only_new_messages(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "party"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    before = await updates(http, run)

    async with open_sse(http, run["stream_url"], params={"skipHistory": "true"}) as sse:
        await _answer_and_finish(http, run)
        live = await sse.read_to_end(timeout=60)

    assert live[0].seq == len(before) + 1, "nothing from before the subscription"
    assert_contiguous(live, first=len(before) + 1)
    assert before + [e.json() for e in live] == await updates(http, run)


async def test_access_token_is_not_logged(
    http: httpx.AsyncClient, examples: list[str], stack: Any
) -> None:
    run = await start(http, graph="pipeline", input={"text": "fine"})
    await wait_for_status(http, run["workflow_id"], {"completed"})
    token = "tok-DO-NOT-LOG-42"
    async with open_sse(http, run["stream_url"], params={"access_token": token}) as sse:
        await sse.read_to_end(timeout=30)
    marker = f"{run['workflow_id']}/{run['run_id']}/stream?access_token="

    def logged() -> bool:
        return marker in stack.gateway.log_path.read_text()

    wait_until(logged, timeout=10, what="the access-log line of the stream")
    log = stack.gateway.log_path.read_text()
    assert token not in log
    assert f"{marker}***" in log


async def test_idle_stream_sends_retry_hint_and_keep_alive_comments(
    http: httpx.AsyncClient, examples: list[str], stack: Any
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "quiet"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    async with open_sse(http, run["stream_url"], params={"skipHistory": "true"}) as sse:
        # Nothing happens in a paused run: only comments arrive, every keep-alive period.
        first = await sse.next_item(timeout=stack.settings.sse_keepalive_seconds * 5)
        second = await sse.next_item(timeout=stack.settings.sse_keepalive_seconds * 5)
        assert sse.parser.retry == 2000
    assert sse.events == []
    assert [first, second] == sse.comments
    assert all(c.text == "keep-alive" for c in sse.comments)
    await http.post(f"/runs/{run['workflow_id']}/cancel")


async def test_a_broken_live_feed_ends_the_stream_and_resume_loses_nothing(
    http: httpx.AsyncClient, examples: list[str], stack: Any
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "flaky redis"})
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)
        # Drop the gateway's shared pub/sub connection, as a Redis failover would.
        redis = aioredis.Redis.from_url(stack.settings.redis_url)
        try:
            killed = await redis.client_kill_filter(_type="pubsub")
        finally:
            await redis.aclose()
        assert killed >= 1
        await sse.read_to_end(timeout=15)
        assert sse.ended, "the stream ends so that the client resumes"
        seen = list(sse.events)

    await _answer_and_finish(http, run)
    async with open_sse(
        http, run["stream_url"], headers={"Last-Event-ID": seen[-1].id or ""}
    ) as sse:
        seen.extend(await sse.read_to_end(timeout=60))
    assert_contiguous(seen)
    assert [e.json() for e in seen] == await updates(http, run)
    assert seen[-1].json()["t"] == T.COMPLETE


async def test_history_outlives_redis_through_the_archive(
    http: httpx.AsyncClient, examples: list[str], stack: Any
) -> None:
    run = await start(http, graph="pipeline", input={"text": "A calm weekly report"})
    await wait_for_status(http, run["workflow_id"], {"completed"})
    stored = await updates(http, run)
    assert stored[-1]["t"] == T.COMPLETE

    # The run's Redis keys expire (TTL) or are lost: every message is archived.
    redis = aioredis.Redis.from_url(stack.settings.redis_url)
    try:
        keys = [k async for k in redis.scan_iter(match=f"spindle:{{{run['workflow_id']}}}:*")]
        assert keys
        await redis.delete(*keys)
    finally:
        await redis.aclose()

    assert await updates(http, run) == stored
    assert await updates(http, run, since=stored[1]["ts"]) == stored[2:]
    async with open_sse(http, run["stream_url"]) as sse:
        replayed = await sse.read_to_end(timeout=30)
    assert [e.json() for e in replayed] == stored
    assert_contiguous(replayed)
