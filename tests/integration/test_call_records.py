"""Recorded calls (``call_records``) on the real Redis and Mongo wire server: keys,
the n-th identical call, the limits, lookups, and retention
(docs/replay-and-compare.md#recorded-replay)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from spindle.cli.archive_retention import prune_runs
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.forks import CallReplay
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.call_records import CALL_RECORDS, llm_key, tool_key
from spindle.shared.store.run_document import RunRecord, utcnow
from spindle.worker.activities.call_replay import CallRecorder, replayed
from spindle.worker.archive.operations import UpdateRun
from spindle.worker.archive.outbox import ArchiveOutbox
from spindle.worker.archive.writes import attach_outbox
from spindle.worker.contracts import RunRef

pytestmark = pytest.mark.integration


@pytest.fixture
def call_settings(redis_url: str, mongo_url: str) -> Settings:
    return Settings(
        redis_url=redis_url,
        mongo_url=mongo_url,
        mongo_db=f"spindle_calls_{uuid.uuid4().hex[:8]}",
        call_records_max_per_run=3,
        call_record_max_result_bytes=64,
    )


@pytest.fixture
async def recorder(call_settings: Settings) -> AsyncIterator[CallRecorder]:
    bus = MessageBus.from_settings(call_settings)
    archive = RunArchive.from_settings(call_settings)
    await archive.ensure_indexes()
    yield CallRecorder(bus.redis, archive, call_settings)
    await bus.close()
    await archive.close()


def _run(workflow_id: str, replay: CallReplay | None = None) -> RunRef:
    return RunRef(
        workflow_id=workflow_id,
        run_id="r1",
        stream_id=workflow_id,
        graph_name="g",
        replay=replay,
    )


async def _source_run(archive: RunArchive, workflow_id: str, status: str) -> None:
    now = utcnow()
    await archive.create_run(
        RunRecord(
            workflow_id=workflow_id,
            run_id="r1",
            graph_name="g",
            status=status,
            created_at=now,
            updated_at=now,
        )
    )


def test_tool_keys_match_canonical_arguments() -> None:
    one = tool_key("n", "search", {"text": "a", "limit": 3, "extra": None})
    assert one.digest == tool_key("n", "search", {"limit": 3, "text": "a"}).digest
    assert one.digest != tool_key("n", "search", {"limit": 4, "text": "a"}).digest
    assert one.digest != tool_key("m", "search", {"limit": 3, "text": "a"}).digest
    assert one.digest != tool_key("n", "other", {"limit": 3, "text": "a"}).digest
    assert 'tool \'search\', arguments {"limit":3,"text":"a"}' in one.described


def test_llm_keys_match_the_exact_messages_and_model_params() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    params = {"model": "m", "temperature": 0.2, "tools": ["search"]}
    key = llm_key("agent", messages, params)
    assert key.digest == llm_key("agent", [dict(m) for m in messages], dict(params)).digest
    changed = [messages[0], {"role": "user", "content": "q "}]
    assert key.digest != llm_key("agent", changed, params).digest
    assert key.digest != llm_key("agent", messages, {**params, "temperature": 0.3}).digest


async def test_identical_calls_are_numbered_and_the_run_is_bounded(
    recorder: CallRecorder,
) -> None:
    run = _run(f"calls-{uuid.uuid4().hex[:8]}")
    key = tool_key("n", "search", {"q": "x"})
    # Inside an activity: its retry is the same activity execution.
    activity = ActivityEnvironment()
    first = await activity.run(recorder.begin, run, key)
    again = await activity.run(recorder.begin, run, key)  # a retry of the same call
    second = await recorder.begin(run, key, part="2")
    assert (first.n, again.n, second.n) == (1, 1, 2)
    other = await recorder.begin(run, tool_key("n", "search", {"q": "y"}), part="3")
    assert other.n == 1
    # call_records_max_per_run is 3: the fourth call of the run is not recorded.
    past = await recorder.begin(run, key, part="4")
    assert past.n == 0
    assert recorder.record(past, {"ok": True}) is None
    assert recorder.record(first, {"ok": True}) is not None
    # call_record_max_result_bytes is 64.
    assert recorder.record(first, {"text": "x" * 100}) is None
    assert recorder.record(first, b"bytes") is None


async def test_a_replaying_run_answers_from_the_source_or_fails_naming_the_call(
    recorder: CallRecorder,
) -> None:
    assert recorder.archive is not None
    source = _run(f"source-{uuid.uuid4().hex[:8]}")
    key = tool_key("lookup", "search_notes", {"query": "Temporal"})
    plan = await recorder.begin(source, key)
    op = recorder.record(plan, {"content": "[1]", "ok": True})
    assert op is not None
    await op.apply(recorder.archive)

    replay = CallReplay(source_workflow_id=source.workflow_id, tools="recorded")
    fork = _run(f"fork-{uuid.uuid4().hex[:8]}", replay)
    hit = await recorder.begin(fork, key)
    assert hit.hit and replayed(hit) == {"content": "[1]", "ok": True}
    assert hit.details() == {"recorded": True}
    # The second identical call: the source made it once only.
    with pytest.raises(ApplicationError) as failed:
        await recorder.begin(fork, key, part="again")
    assert failed.value.non_retryable
    assert failed.value.type == "NoRecordedCall"
    assert "node 'lookup', tool 'search_notes', arguments {\"query\":\"Temporal\"}" in str(
        failed.value
    )
    live = _run(f"fork-{uuid.uuid4().hex[:8]}", replay.model_copy(update={"on_miss": "live"}))
    await recorder.begin(live, key)
    missed = await recorder.begin(live, key, part="again")
    assert not missed.hit and missed.details() == {"recorded": False}
    # LLM turns stay live when only tools are recorded: no flag on them.
    turn = await recorder.begin(fork, llm_key("lookup", [], {}))
    assert not turn.hit and turn.details() == {}


async def test_records_go_with_their_run_when_the_archive_is_pruned(
    recorder: CallRecorder,
) -> None:
    archive = recorder.archive
    assert archive is not None
    workflow_id = f"old-{uuid.uuid4().hex[:8]}"
    await _source_run(archive, workflow_id, "completed")
    plan = await recorder.begin(_run(workflow_id), tool_key("n", "t", {}))
    op = recorder.record(plan, 1)
    assert op is not None
    await op.apply(archive)
    records = archive.database[CALL_RECORDS]
    assert await records.count_documents({"workflow_id": workflow_id}) == 1
    await prune_runs(
        archive, older_than=utcnow() + timedelta(seconds=5), workflow_ids=[workflow_id]
    )
    assert await records.count_documents({"workflow_id": workflow_id}) == 0


class WatchedOutbox(ArchiveOutbox):
    """An outbox that says when a reader starts waiting for it to catch up."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = asyncio.Event()

    async def caught_up(self, *, within: float) -> bool:
        self.waiting.set()
        return await super().caught_up(within=within)


async def test_a_miss_waits_for_a_lost_workers_queue_unless_the_source_end_is_archived(
    call_settings: Settings,
) -> None:
    """docs/replay-and-compare.md#limits: a source that just ended may still have its
    records queued behind a worker lost while draining; a fork waits for them."""
    bus = MessageBus.from_settings(call_settings)
    archive = RunArchive.from_settings(call_settings)
    outbox = WatchedOutbox(bus.redis, call_settings.mongo_db)
    attach_outbox(archive, outbox)
    recorder = CallRecorder(
        bus.redis, archive, call_settings.model_copy(update={"archive_catch_up_seconds": 600})
    )
    try:
        source = _run(f"source-{uuid.uuid4().hex[:8]}")
        await _source_run(archive, source.workflow_id, "running")
        key = tool_key("lookup", "search_notes", {"query": "Redis"})
        op = recorder.record(await recorder.begin(source, key), {"ok": True})
        assert op is not None
        # The source's record (and its end) sit in the queue of a worker that died
        # holding the drain lock.
        await outbox.push(
            op, UpdateRun(workflow_id=source.workflow_id, fields={"status": "completed"})
        )
        await bus.redis.set(outbox.lock_key, b"a-lost-worker", px=600_000)

        replay = CallReplay(source_workflow_id=source.workflow_id, tools="recorded")
        fork = _run(f"fork-{uuid.uuid4().hex[:8]}", replay)
        waiting = asyncio.create_task(recorder.begin(fork, key))
        started = asyncio.create_task(outbox.waiting.wait())
        await asyncio.wait({waiting, started}, return_when=asyncio.FIRST_COMPLETED)
        assert started.done() and not waiting.done(), "the miss did not wait"
        # Another worker takes over once the lost one's lock expires.
        await bus.redis.delete(outbox.lock_key)
        assert await outbox.drain(archive) == 2
        plan = await waiting
        assert plan.hit and replayed(plan) == {"ok": True}

        # The source's end is archived now: a real miss fails at once, whatever the
        # queue holds (a lock held again, something queued behind it).
        outbox.waiting.clear()
        await outbox.push(UpdateRun(workflow_id="another", fields={"status": "running"}))
        await bus.redis.set(outbox.lock_key, b"a-lost-worker", px=600_000)
        with pytest.raises(ApplicationError) as missed:
            await asyncio.wait_for(recorder.begin(fork, key, part="again"), timeout=60)
        assert missed.value.type == "NoRecordedCall"
        assert not outbox.waiting.is_set()
        assert "archive_catch_up_seconds" not in str(missed.value)

        # A source whose end is still queued past archive_catch_up_seconds: the miss
        # says why it found nothing.
        waiting = _run(f"source-{uuid.uuid4().hex[:8]}")
        await _source_run(archive, waiting.workflow_id, "running")
        impatient = CallRecorder(
            bus.redis, archive, call_settings.model_copy(update={"archive_catch_up_seconds": 0.2})
        )
        late = _run(
            f"fork-{uuid.uuid4().hex[:8]}",
            CallReplay(source_workflow_id=waiting.workflow_id, tools="recorded"),
        )
        with pytest.raises(ApplicationError) as behind:
            await impatient.begin(late, key)
        assert "archive was still behind after 0.2 s (archive_catch_up_seconds)" in str(
            behind.value
        )
    finally:
        await bus.redis.delete(outbox.lock_key)
        attach_outbox(archive, None)
        await bus.close()
        await archive.close()
