"""A cancel that meets the failure of a signal in flight in the same workflow task
(a terminated run's workstream child: its parent is gone, and the gateway cancels
it) ends the workflow; cancelling the task that awaits the signal fails every
attempt of the workflow task instead (docs/workstreams.md#ends-and-cancels)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import CancelledError
from temporalio.worker import Worker

from spindle.worker.sandbox import workflow_runner
from tests.polling import eventually
from tests.workflow.signal_race import (
    CancelGate,
    EndSignalUnderCancel,
    GatedRunner,
    ProgressUnderCancel,
)

pytestmark = pytest.mark.workflow

NONDETERMINISM = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR


@asynccontextmanager
async def cancelled_with_its_signal_failure(
    client: Client, workflow: Any, mode: str
) -> AsyncIterator[WorkflowHandle[Any, str]]:
    """``workflow`` on a gated worker, cancelled so that the cancel and its signal's
    failure reach it in one workflow task; the worker runs until the block ends."""
    gate = CancelGate()
    queue = f"signal-race-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client,
        task_queue=queue,
        workflows=[ProgressUnderCancel, EndSignalUnderCancel],
        workflow_runner=GatedRunner(workflow_runner(), gate),
    ):
        handle: WorkflowHandle[Any, str] = await client.start_workflow(
            workflow, mode, id=f"signal-race-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        await eventually(gate.held.is_set, what="the workflow task with the signal's failure")
        await handle.cancel()
        gate.cancel_sent.set()
        try:
            yield handle
        finally:
            if (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
                await handle.terminate("test over")


async def failed_task_causes(handle: WorkflowHandle[Any, Any]) -> list[int]:
    return [
        e.workflow_task_failed_event_attributes.cause
        async for e in handle.fetch_history_events()
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def test_a_stopped_progress_sender_lets_the_cancelled_workflow_end(
    temporal_client: Client,
) -> None:
    # As the child stops its progress sender: the signal in flight ends (failed),
    # then the sender does; the workflow ends as its code says.
    async with cancelled_with_its_signal_failure(
        temporal_client, ProgressUnderCancel.run, "stop"
    ) as handle:
        result = await asyncio.wait_for(handle.result(), timeout=15)
        assert result == "stopped; parent gone: True"
        assert NONDETERMINISM not in await failed_task_causes(handle)


async def test_the_end_signal_meets_the_cancel_and_the_workflow_ends_canceled(
    temporal_client: Client,
) -> None:
    # As the child tells its parent it ended: the cancel is raised once the signal
    # has failed, and the workflow ends cancelled.
    async with cancelled_with_its_signal_failure(
        temporal_client, EndSignalUnderCancel.run, "through"
    ) as handle:
        with pytest.raises(WorkflowFailureError) as failed:
            await asyncio.wait_for(handle.result(), timeout=15)
        assert isinstance(failed.value.cause, CancelledError)
        assert (await handle.describe()).status == WorkflowExecutionStatus.CANCELED
        assert NONDETERMINISM not in await failed_task_causes(handle)


async def test_cancelling_the_task_that_awaits_the_signal_fails_its_workflow_task(
    temporal_client: Client,
) -> None:
    # What ``signal_to_its_end`` avoids, through the same gate (temporalio 1.35): the
    # SDK sends a cancel for the signal already resolved, and Core refuses it on
    # every attempt. (The child's progress sender met the same refusal when the
    # activity the child awaited ended in that workflow task too, an order this gate
    # cannot force: the sender is now stopped, never cancelled.)
    async with cancelled_with_its_signal_failure(
        temporal_client, EndSignalUnderCancel.run, "plain"
    ) as handle:

        async def refused() -> bool:
            return NONDETERMINISM in await failed_task_causes(handle)

        await eventually(refused, what="a workflow task failed as nondeterministic")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
