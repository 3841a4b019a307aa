"""Fixtures for recording histories on the real dev server with the real worker."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker
from tests.workflow.runs import GraphRunner


@pytest.fixture(scope="module")
async def dev_runner(temporal_client: Client, settings: Settings) -> AsyncIterator[GraphRunner]:
    """W2's worker on the session dev server, on a task queue of this module."""
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    task_queue = f"replay-{uuid.uuid4().hex[:10]}"
    worker = build_worker(
        temporal_client, settings, bus=bus, archive=archive, task_queue=task_queue
    )
    try:
        async with worker:
            yield GraphRunner(temporal_client, task_queue, bus, archive)
    finally:
        await bus.close()
        await archive.close()
