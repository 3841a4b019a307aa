"""Runs a schedule starts on its own timetable take their tenant's run-start permits.

Issue 28 (high): "25 schedules started 25 runs in 75 s for a tenant limited to 20 a
minute": Temporal starts a schedule's runs, where no gateway code runs, so they were
not counted. The schedule here is made through the Temporal client (as the gateway
makes it) and its timetable is played by a backfill through the Temporal client
too, so no gateway permit is taken: the runs must take theirs on the worker.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleBackfill,
    ScheduleHandle,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    WorkflowFailureError,
)
from temporalio.exceptions import ApplicationError

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, RunStatus
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.rate_limits import rate_limit_key
from spindle.shared.platform.run_start_permits import RUN_START, RunStartPermits
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.temporal.converter import data_converter
from spindle.worker.contracts import Empty, RunStartAdmission
from spindle.worker.main import build_worker
from tests.polling import eventually
from tests.temporal_history import executed_activities

pytestmark = pytest.mark.integration

#: The tenant's limit here: a permit every 30 s, two at once.
PER_MINUTE = 2
#: Timetable runs due within the window: more than the limit.
RUNS = 5

CHAIN = parse_graph(
    {
        "name": "permit-chain",
        "entry": "a",
        "nodes": [
            {"id": n, "type": "tool", "params": {"tool": "word_count", "args": {"text": n}}}
            for n in ("a", "b")
        ],
        "edges": [{"from": "a", "to": "b"}],
    }
)


class Stack:
    def __init__(self, client: Client, task_queue: str, bus: MessageBus, archive: RunArchive):
        self.client, self.task_queue, self.bus, self.archive = client, task_queue, bus, archive


@pytest.fixture(scope="module")
async def stack(temporal_client: Client, settings: Settings) -> AsyncIterator[Stack]:
    """A worker whose tenants may start ``PER_MINUTE`` runs a minute."""
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    task_queue = f"permits-{uuid.uuid4().hex[:10]}"
    limited = settings.model_copy(
        update={"task_queue": task_queue, "rate_limit_run_starts": PER_MINUTE}
    )
    try:
        async with build_worker(temporal_client, limited, bus=bus, archive=archive):
            yield Stack(temporal_client, task_queue, bus, archive)
    finally:
        await bus.close()
        await archive.close()


async def hourly_schedule(
    stack: Stack, tenant: str, schedule_id: str, minute: int
) -> ScheduleHandle:
    """A live (unpaused) schedule of ``tenant`` due every hour at ``minute``."""
    action = ScheduleActionStartWorkflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=CHAIN, input={}, tenant_id=tenant, scheduled_by=schedule_id),
        id=f"run-{schedule_id}",
        task_queue=stack.task_queue,
    )
    spec = ScheduleSpec(
        intervals=[ScheduleIntervalSpec(every=timedelta(hours=1), offset=timedelta(minutes=minute))]
    )
    return await stack.client.create_schedule(
        schedule_id,
        Schedule(
            action=action,
            spec=spec,
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.ALLOW_ALL),
        ),
    )


async def started_runs(handle: ScheduleHandle, count: int) -> list[str]:
    """The workflow ids of the schedule's runs, once it has started ``count``."""

    async def probe() -> list[str] | None:
        info = (await handle.describe()).info
        ids = [a.action.workflow_id for a in info.recent_actions]  # type: ignore[attr-defined]
        return ids if info.num_actions >= count and len(ids) >= count else None

    return await eventually(probe, timeout=30, interval=0.2, what=f"{count} scheduled runs")


async def outcome(stack: Stack, workflow_id: str) -> ApplicationError | None:
    """None when the run completed, else the failure it ended with."""
    handle = stack.client.get_workflow_handle(workflow_id)
    try:
        await asyncio.wait_for(handle.result(), 60)
    except WorkflowFailureError as exc:
        assert isinstance(exc.cause, ApplicationError), exc.cause
        return exc.cause
    return None


async def test_timetable_runs_over_the_limit_run_no_node_and_fail_naming_it(
    stack: Stack,
) -> None:
    tenant = f"sched-{uuid.uuid4().hex[:8]}"
    schedule_id = f"sch-{tenant}-tick"
    now = datetime.now(UTC)
    # Due ~30 minutes from now: its own timetable starts nothing during the test.
    minute = (now.minute + 30) % 60
    handle = await hourly_schedule(stack, tenant, schedule_id, minute)
    try:
        # Temporal plays RUNS hourly start times of a past day at once: what a tenant's
        # schedules starting runs on their timetables looks like to the worker.
        due = (now - timedelta(days=2)).replace(minute=minute, second=0, microsecond=0)
        await handle.backfill(
            ScheduleBackfill(
                start_at=due - timedelta(minutes=1),
                end_at=due + timedelta(hours=RUNS - 1, minutes=1),
                overlap=ScheduleOverlapPolicy.ALLOW_ALL,
            )
        )
        runs = await started_runs(handle, RUNS)
        assert len(runs) == RUNS
        outcomes = {wf: await outcome(stack, wf) for wf in runs}

        completed = [wf for wf, failure in outcomes.items() if failure is None]
        refused = {wf: failure for wf, failure in outcomes.items() if failure is not None}
        # At most the limit ran their graph (a permit comes back every 30 s: the runs
        # start within a few seconds, so exactly PER_MINUTE on any sane machine).
        assert 1 <= len(completed) <= PER_MINUTE, outcomes
        assert len(refused) == RUNS - len(completed)
        for workflow_id, failure in refused.items():
            assert failure.type == "RunStartLimited", failure
            assert "rate_limit_run_starts" in failure.message
            assert f"limit of {PER_MINUTE} run starts per minute" in failure.message
            history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
            # None of its nodes ran: its start (the permit) and its end only.
            ran = [e.activity_id for e in executed_activities(history)]
            assert ran == ["record_start", "finish"], ran
            record = await stack.archive.get_run(workflow_id)
            assert record is not None and record.status == RunStatus.FAILED
            assert record.error is not None and "rate_limit_run_starts" in record.error
            messages = [orjson.loads(m.raw) for m in await stack.bus.history(workflow_id)]
            errors = [m for m in messages if m["t"] == AgentMessageType.ERROR]
            assert errors and "rate_limit_run_starts" in errors[0]["m"], messages
        for workflow_id in completed:
            history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
            ran = [e.activity_id for e in executed_activities(history)]
            assert {"a.1", "b.1"} <= set(ran), ran
        # The schedule goes on: a refused run does not pause it.
        described = await handle.describe()
        assert not described.schedule.state.paused
    finally:
        await handle.delete()


async def test_a_prepaid_permit_is_used_once_and_a_decision_is_kept_per_run(
    stack: Stack,
) -> None:
    """A trigger's or backfill's permits, taken by the gateway, are not taken again by
    their runs; a retried activity gets the same answer (no second permit)."""
    tenant = f"prepaid-{uuid.uuid4().hex[:8]}"
    redis = stack.bus.redis
    permits = RunStartPermits(redis)
    key = rate_limit_key(tenant, RUN_START)
    await permits.prepay(tenant, "s", 1)
    used = await permits.take_scheduled(tenant, "s", "wf-1", per_minute=1)
    assert used.allowed and used.prepaid
    assert await redis.get(key) is None  # the limiter was not touched
    counted = await permits.take_scheduled(tenant, "s", "wf-2", per_minute=1)
    assert counted.allowed and not counted.prepaid
    refused = await permits.take_scheduled(tenant, "s", "wf-3", per_minute=1)
    assert not refused.allowed and refused.retry_after > 0
    # Asked again (a retry), each run gets its first answer and takes nothing more.
    assert (await permits.take_scheduled(tenant, "s", "wf-2", per_minute=1)).allowed
    assert not (await permits.take_scheduled(tenant, "s", "wf-3", per_minute=1)).allowed
    await permits.prepay(tenant, "s", 2)
    await permits.withdraw(tenant, "s", 2)
    assert not (await permits.take_scheduled(tenant, "s", "wf-4", per_minute=1)).allowed


def test_a_start_recorded_before_permits_reads_as_admitted(settings: Settings) -> None:
    """``record_run_start`` returned ``Empty`` before permits: those histories replay
    with the run admitted (the workflow's commands are unchanged, so no patch)."""
    converter = data_converter(settings).payload_converter
    [recorded] = converter.to_payloads([Empty()])
    assert recorded.data == b"{}"
    [admission] = converter.from_payloads([recorded], [RunStartAdmission])
    assert admission == RunStartAdmission(admitted=True, error=None)
