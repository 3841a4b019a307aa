"""MongoDB (nx-27017) goes away mid-run: the run goes on and completes; the
archive writes wait in the Redis outbox; once MongoDB is back, the worker's
catch-up loop replays them and the archive holds every message, every node
report and the run's final status."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
from pymongo import AsyncMongoClient

from spindle.shared.store.archive import RunArchive
from spindle.worker.archive.outbox import ArchiveOutbox
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.faults.conftest import FaultStack, approval_graph, wait_ready
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(90)]

# A run of a handful of nodes would take minutes if every archive write waited
# for MongoDB's server-selection timeout; with the outbox it barely slows down.
RUN_WITHOUT_MONGO_SECONDS = 20


async def test_runs_go_on_without_mongo_and_the_archive_catches_up(
    fault_stack: FaultStack,
) -> None:
    http, mongo, settings = fault_stack.http, fault_stack.mongo, fault_stack.settings
    await wait_ready(http)
    run = await start(
        http, graph_spec=approval_graph(f"mongo-{uuid.uuid4().hex[:8]}"), input={"topic": "db"}
    )
    wf = run["workflow_id"]
    redis = aioredis.Redis.from_url(settings.redis_url)
    outbox = ArchiveOutbox(redis, settings.mongo_db)
    try:
        async with open_sse(http, run["stream_url"]) as sse:
            await sse.until_type(T.REQUEST_INPUT)
            mongo.kill()
            answered = time.monotonic()
            reply = await answer(
                http, run, {"data": {"decision": "approve"}, "client_message_id": "m1"}
            )
            assert reply.status_code == 200, reply.text
            await sse.read_to_end(timeout=RUN_WITHOUT_MONGO_SECONDS)
            assert sse.ended, "the run finished its conversation without MongoDB"
            assert time.monotonic() - answered < RUN_WITHOUT_MONGO_SECONDS
        streamed = [e.json() for e in sse.events]
        assert_contiguous(sse.events)
        assert streamed[-1]["t"] == T.COMPLETE
        done = await wait_for_status(http, wf, {"completed"}, timeout=10)
        assert done["output"]["decision"] == "approve"
        assert await outbox.pending() > 0, "the archive writes made meanwhile wait in Redis"
    finally:
        if not mongo.alive():
            mongo.start()
        await redis.aclose()

    assert streamed == await updates(http, run)
    archive = RunArchive(AsyncMongoClient(settings.mongo_url, tz_aware=True), settings.mongo_db)
    try:

        async def archived() -> dict[str, Any] | None:
            record = await archive.get_run(wf)
            if record is None or record.status != "completed":
                return None
            messages = await archive.messages(wf)
            if len(messages) < len(streamed):
                return None
            return {"record": record, "messages": messages}

        caught_up = await eventually(
            archived, what="the archive caught up with the run", timeout=30, interval=0.2
        )
        stored = caught_up["messages"]
        assert [(m.seq, m.raw.decode()) for m in stored] == [(e.seq, e.data) for e in sse.events]
        assert caught_up["record"].output == done["output"]
        reports = await archive.node_reports(wf)
        assert {r["node_id"] for r in reports} >= {"draft", "review", "route", "publish", "result"}
        # The nodes that ran succeeded; the branch the router did not take is SKIPPED.
        ran = {"draft", "review", "route", "publish", "result"}
        assert all(r["status"] == "SUCCESS" for r in reports if r["node_id"] in ran), reports
        assert all(r["status"] == "SKIPPED" for r in reports if r["node_id"] not in ran), reports
    finally:
        await archive.close()
