"""Driving ``GraphRun`` with workstreams on a time-skipping server of its own.

The child is ``tests.workflow.stub_workstream`` (scripted by its task), so the
parent's timeline is exact; ``production_runner`` runs the production worker
with the real ``Workstream`` child. Activities are the real ones (Redis bus, nx-27017
archive and file store, offline LLM) except ``post_message``, which also records
what the parent said and when (the activity's scheduled time is workflow time on
this server).
"""

from __future__ import annotations

import itertools
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from temporalio import activity
from temporalio.api.workflowservice.v1 import ListOpenWorkflowExecutionsRequest
from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.workstreams import (
    LAUNCH_WORKSTREAM_UPDATE,
    WORKSTREAMS_QUERY,
    LaunchAck,
    LaunchRequest,
    WorkstreamInfo,
    WorkstreamList,
    child_workflow_id,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.worker.activities import build_activities
from spindle.worker.activities.artifacts import artifact_activities
from spindle.worker.activities.lifecycle import LifecycleActivities
from spindle.worker.contracts import POST_MESSAGE, Empty, RunNotice
from spindle.worker.llm.offline import OfflineProvider
from spindle.worker.main import build_worker
from spindle.worker.sandbox import workflow_runner
from spindle.worker.workflows.graph_run import GraphRun
from tests.workflow.runs import GraphRunner, M
from tests.workflow.stub_workstream import STUB_LOG_QUERY, StubLog, StubWorkstream


@dataclass
class Posted:
    """One ``post_message`` call: what the workflow said, and when (workflow time)."""

    activity_id: str
    type: M
    text: str
    details: dict[str, Any]
    at: datetime


@dataclass
class PostRecorder:
    """``post_message`` that records each call, then posts for real."""

    lifecycle: LifecycleActivities
    calls: dict[str, list[Posted]] = field(default_factory=lambda: defaultdict(list))

    @activity.defn(name=POST_MESSAGE)
    async def post_message(self, notice: RunNotice) -> Empty:
        info = activity.info()
        posted = Posted(
            info.activity_id, M(notice.type), notice.text, notice.details or {}, info.scheduled_time
        )
        if info.attempt == 1:
            self.calls[notice.run.workflow_id].append(posted)
        return await self.lifecycle.post_message(notice)


@dataclass
class Parents:
    env: WorkflowEnvironment
    runner: GraphRunner
    posts: PostRecorder
    files: FileStore

    @property
    def client(self) -> Any:
        return self.runner.client

    async def workstreams(self, handle: WorkflowHandle[Any, Any]) -> list[WorkstreamInfo]:
        listed = await handle.query(WORKSTREAMS_QUERY, result_type=WorkstreamList)
        return listed.workstreams

    async def stub_log(self, parent_id: str, launch_id: str) -> StubLog:
        child = self.client.get_workflow_handle(child_workflow_id(parent_id, launch_id))
        log: StubLog = await child.query(STUB_LOG_QUERY, result_type=StubLog)
        return log

    # While this server delivers a cancel request to another workflow it may skip
    # time far ahead (to the runs' 10-year timeout). So a run that force-cancels a
    # child skips explicitly to just before that, then goes on in real time.

    async def skip_to_just_before(self, seconds: float) -> None:
        """Let ``seconds`` of workflow time pass at once, less half a second."""
        await self.env.sleep(seconds - 0.5)

    async def result_in_real_time(self, handle: WorkflowHandle[Any, Any]) -> Any:
        with self.env.auto_time_skipping_disabled():
            return await handle.result()

    async def open_workflows(self, prefix: str) -> list[str]:
        """Ids of the running workflows whose id starts with ``prefix``, sorted."""
        listed = await self.client.workflow_service.list_open_workflow_executions(
            ListOpenWorkflowExecutionsRequest(
                namespace=self.client.namespace, maximum_page_size=1000
            )
        )
        return sorted(
            e.execution.workflow_id
            for e in listed.executions
            if e.execution.workflow_id.startswith(prefix)
        )

    async def launch(self, handle: WorkflowHandle[Any, Any], request: LaunchRequest) -> LaunchAck:
        ack: LaunchAck = await handle.execute_update(
            LAUNCH_WORKSTREAM_UPDATE, request, result_type=LaunchAck
        )
        return ack


@asynccontextmanager
async def parents_with_stub_children(
    env: WorkflowEnvironment,
    settings: Settings,
    bus: MessageBus,
    archive: RunArchive,
    task_queue: str | None = None,
    provider: OfflineProvider | None = None,
    **worker_options: Any,
) -> AsyncIterator[Parents]:
    """A worker running ``GraphRun`` with the stub child, on a task queue of its own
    (``task_queue``: to stand a worker up again on the queue of an earlier one;
    ``provider``: the offline model, e.g. one that streams slowly)."""
    task_queue = task_queue or f"wsp-{uuid.uuid4().hex[:10]}"
    posts = PostRecorder(LifecycleActivities(bus, archive, settings=settings))
    activities = [
        fn
        for fn in build_activities(bus, archive, provider or OfflineProvider(), settings=settings)
        if fn.__name__ != "post_message"
    ]
    worker = Worker(
        env.client,
        task_queue=task_queue,
        workflows=[GraphRun, StubWorkstream],
        activities=[*activities, *artifact_activities(archive), posts.post_message],
        workflow_runner=workflow_runner(),
        **worker_options,
    )
    async with worker:
        runner = GraphRunner(env.client, task_queue, bus, archive)
        yield Parents(env, runner, posts, FileStore(archive.database))


@asynccontextmanager
async def production_runner(
    env: WorkflowEnvironment, settings: Settings, bus: MessageBus, archive: RunArchive
) -> AsyncIterator[GraphRunner]:
    """The production worker (``build_worker``): GraphRun with the real ``Workstream``."""
    task_queue = f"wsr-{uuid.uuid4().hex[:10]}"
    worker = build_worker(env.client, settings, bus=bus, archive=archive, task_queue=task_queue)
    async with worker:
        yield GraphRunner(env.client, task_queue, bus, archive)


def graph(name: str, *nodes: dict[str, Any]) -> GraphSpec:
    ids = [n["id"] for n in nodes]
    edges = [{"from": a, "to": b} for a, b in itertools.pairwise(ids)]
    return parse_graph({"name": name, "entry": ids[0], "nodes": list(nodes), "edges": edges})


def workstream_node(task: str, **params: Any) -> dict[str, Any]:
    return {"id": "launch", "type": "workstream", "params": {"task": task, **params}}


HOLD = graph("hold", {"id": "hold", "type": "prompt", "params": {"prompt": "Done?"}})


async def refused(call: Awaitable[Any]) -> ApplicationError:
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await call
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError)
    return cause


def seconds_after(start: str, when: datetime) -> float:
    return (when - datetime.fromisoformat(start)).total_seconds()
