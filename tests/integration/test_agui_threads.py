"""AG-UI thread and run records in Redis (gateway/protocols/agui/threads.py)."""

from __future__ import annotations

import uuid

import pytest

from spindle.gateway.protocols.agui.threads import AguiRunRecord, AguiThreads
from spindle.shared.bus.message_bus import MessageBus

pytestmark = pytest.mark.integration


async def test_a_run_id_is_claimed_once_and_ready_only_once_saved(bus: MessageBus) -> None:
    threads = AguiThreads(bus)
    tenant, thread = f"t-{uuid.uuid4().hex[:8]}", "thread-1"
    assert await threads.claim_run(tenant, thread, "r1")
    assert not await threads.claim_run(tenant, thread, "r1")  # a retry or a reconnect
    assert await threads.run(tenant, thread, "r1") is None  # still being started
    record = AguiRunRecord(workflow_id="wf-1", start_seq=7, graph="g")
    await threads.save_run(tenant, thread, "r1", record)
    saved = await threads.run(tenant, thread, "r1")
    assert saved is not None and (saved.workflow_id, saved.start_seq) == ("wf-1", 7)
    await threads.release_run(tenant, thread, "r2")  # an unknown one: nothing happens
    assert await threads.claim_run(tenant, thread, "r2")
    await threads.release_run(tenant, thread, "r2")
    assert await threads.claim_run(tenant, thread, "r2"), "a released claim is free again"


async def test_records_are_per_tenant_and_ids_do_not_run_into_each_other(bus: MessageBus) -> None:
    threads = AguiThreads(bus)
    tenant, other = f"t-{uuid.uuid4().hex[:8]}", f"t-{uuid.uuid4().hex[:8]}"
    await threads.set_thread_run(tenant, "thread", "wf-a")
    assert await threads.thread_run(tenant, "thread") == "wf-a"
    assert await threads.thread_run(other, "thread") is None
    assert await threads.claim_run(tenant, "a:b", "c")
    assert await threads.claim_run(tenant, "a", "b:c"), "another thread's run, not the same key"
    assert await threads.claim_run(other, "a:b", "c")
