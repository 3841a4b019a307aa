"""Fixtures for ``GraphRun`` on the time-skipping server with the real activities.

The worker is W2's ``build_worker`` (real activities, real Redis bus, real
nx-27017 archive, the deterministic offline LLM) on ``time_skipping_env.client``;
each test module gets its own task queue.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.testing import WorkflowEnvironment

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner
from tests.workflow.workstream_parents import Parents, parents_with_stub_children


@pytest.fixture(scope="session")
def worker_settings(redis_url: str, mongo_url: str) -> Settings:
    """Settings for in-process workers: the session's Redis and Mongo, offline LLM.

    Built directly (not from the ``settings`` fixture) so time-skipping tests do
    not need the dev server.
    """
    return Settings(
        redis_url=redis_url,
        mongo_url=mongo_url,
        mongo_db=f"spindle_wf_{uuid.uuid4().hex[:8]}",
        llm_provider="offline",
        task_queue="spindle-wf",
        worker_max_concurrent_activities=20,
    )


@pytest.fixture(scope="session")
async def run_bus(worker_settings: Settings) -> AsyncIterator[MessageBus]:
    bus = MessageBus.from_settings(worker_settings)
    yield bus
    await bus.close()


@pytest.fixture(scope="session")
async def run_archive(worker_settings: Settings) -> AsyncIterator[RunArchive]:
    archive = RunArchive.from_settings(worker_settings)
    await archive.ensure_indexes()
    yield archive
    await archive.close()


@pytest.fixture(scope="module")
async def runner(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[GraphRunner]:
    """A running worker on a task queue of this module, and helpers to drive runs."""
    task_queue = f"wf-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        time_skipping_env.client,
        worker_settings,
        bus=run_bus,
        archive=run_archive,
        task_queue=task_queue,
    )
    async with worker:
        yield GraphRunner(time_skipping_env.client, task_queue, run_bus, run_archive)


@pytest.fixture(scope="module")
async def parents(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[Parents]:
    async with parents_with_stub_children(
        time_skipping_env, worker_settings, run_bus, run_archive
    ) as harness:
        yield harness
