"""Hold one activity of the production worker while a test cancels the run awaiting
it: the cancel then reaches the run inside that activity's await, where the SDK
hands it over as an ActivityError (see ``CANCEL_IN_ACTIVITY_PATCH``). Shared by the
run-finish tests and the replay recordings."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.worker import Worker

from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import Empty
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import worker_activities, workflow_classes
from spindle.worker.sandbox import workflow_runner
from tests.workflow.runs import GraphRunner, M, types_of

# Loops once; the loop-back refused the second time posts a WARNING before ``done``.
LOOP_ONCE = parse_graph(
    {
        "name": "finish-loop-once",
        "entry": "first",
        "nodes": [
            {
                "id": "first",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            {
                "id": "check",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "b"}},
            },
            {"id": "done", "type": "output", "params": {"select": "check"}},
        ],
        "edges": [
            {"from": "first", "to": "check"},
            {"from": "check", "to": "first", "max_iterations": 1},
            {"from": "check", "to": "done"},
        ],
    }
)


class HeldActivity:
    """One activity of the production worker (given ``settings``), held on the calls
    ``holds`` picks until released: a cancel reaches the run while it awaits that activity."""

    def __init__(
        self,
        runner: GraphRunner,
        settings: Settings,
        name: str,
        arg_type: type[Any],
        holds: Callable[[Any], bool],
    ) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.runner = runner
        activities = worker_activities(
            runner.bus, runner.archive, OfflineProvider(), settings=settings
        )
        original = next(
            a for a in activities if activity._Definition.must_from_callable(a).name == name
        )

        async def held(arg: Any) -> Empty:
            if holds(arg):
                self.entered.set()
                await self.release.wait()
            result: Empty = await original(arg)
            return result

        # The SDK decodes the argument by the annotation: the original's model.
        held.__annotations__ = {"arg": arg_type, "return": Empty}
        self.activities = [
            activity.defn(name=name)(held) if a is original else a for a in activities
        ]

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[GraphRunner]:
        """A worker with the held activity on a queue of its own, and a runner for it."""
        task_queue = f"held-{uuid.uuid4().hex[:10]}"
        worker = Worker(
            self.runner.client,
            task_queue=task_queue,
            workflows=workflow_classes(),
            activities=self.activities,
            workflow_runner=workflow_runner(),
        )
        async with worker:
            try:
                yield GraphRunner(
                    self.runner.client, task_queue, self.runner.bus, self.runner.archive
                )
            finally:
                self.release.set()  # the worker's shutdown waits for the held call


async def cancel_while_held(
    held: HeldActivity, start: Callable[[GraphRunner], Awaitable[WorkflowHandle[Any, Any]]]
) -> WorkflowHandle[Any, Any]:
    """Start a run on the held worker, cancel it once it awaits the held activity,
    and wait for its end."""
    async with held.worker() as runner:
        handle = await start(runner)
        await asyncio.wait_for(held.entered.wait(), timeout=30)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
    return handle


async def assert_ended_canceled(runner: GraphRunner, handle: WorkflowHandle[Any, Any]) -> None:
    """Canceled in Temporal, TERMINATED last on the stream, ``canceled`` in the archive."""
    assert (await handle.describe()).status is WorkflowExecutionStatus.CANCELED
    kinds = types_of(await runner.messages(handle.id))
    assert kinds[-1:] == [M.TERMINATED], kinds
    assert M.COMPLETE not in kinds, "the run did not go on to its end"
    document = await runner.archive.database["runs"].find_one({"_id": handle.id})
    assert document is not None and document["status"] == "canceled"
