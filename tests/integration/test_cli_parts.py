"""``spindle worker`` and ``spindle gateway`` as a deployment runs them: each
alone, configured only by SPINDLE_* variables, against the session's servers;
each serves, then stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from spindle.dev.processes import ManagedProcess, bin_path, free_port, wait_until
from spindle.shared.platform.settings import Settings
from tests.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def part() -> Iterator[list[ManagedProcess]]:
    started: list[ManagedProcess] = []
    yield started
    for process in started:
        process.kill()


def spindle_part(name: str, tmp_path: Path, env: dict[str, str]) -> ManagedProcess:
    return ManagedProcess(
        f"spindle {name}", [bin_path("spindle"), name], log_path=tmp_path / f"{name}.log", env=env
    ).start()


def stop_with_sigterm(process: ManagedProcess) -> int:
    assert process.proc is not None
    process.proc.send_signal(signal.SIGTERM)
    try:
        return process.proc.wait(timeout=40)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(
            f"{process.name} did not stop within 40 s of SIGTERM:\n{process.log_tail()}"
        ) from None


async def test_spindle_worker_polls_its_task_queue_and_stops_on_sigterm(
    settings: Settings, temporal_client: Client, tmp_path: Path, part: list[ManagedProcess]
) -> None:
    # Its own queue, so this worker takes no task of another test.
    queue = f"cli-worker-{uuid.uuid4().hex[:8]}"
    worker = spindle_part("worker", tmp_path, {"SPINDLE_TASK_QUEUE": queue})
    part.append(worker)
    request = DescribeTaskQueueRequest(
        namespace=settings.temporal_namespace,
        task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )

    async def polling() -> bool:
        pollers = (await temporal_client.workflow_service.describe_task_queue(request)).pollers
        return any(p.identity.startswith(f"{worker.pid}@") for p in pollers)

    await eventually(
        polling,
        what=f"spindle worker polls {queue}",
        timeout=60,
        interval=0.1,
        alive=worker.alive,
    )

    code = await asyncio.to_thread(stop_with_sigterm, worker)
    assert code == 0, worker.log_tail()


def test_spindle_gateway_serves_and_stops_on_sigterm(
    settings: Settings, tmp_path: Path, part: list[ManagedProcess]
) -> None:
    port = free_port()
    # Auth on, as deployed: the signing secret is required.
    env = {"SPINDLE_GATEWAY_PORT": str(port), "SPINDLE_AUTH_SECRET": "s" * 32}
    gateway = spindle_part("gateway", tmp_path, env)
    part.append(gateway)

    def ready() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout=60, what="spindle gateway /readyz", alive=gateway.alive)
    assert os.environ["SPINDLE_MONGO_URL"] == settings.mongo_url  # configured by env only

    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status
    # says which signal ended it.
    assert stop_with_sigterm(gateway) in (0, -signal.SIGTERM), gateway.log_tail()
    assert "Application shutdown complete." in gateway.log_tail()


def test_spindle_gateway_with_auth_on_and_no_secret_refuses_to_start(
    tmp_path: Path, part: list[ManagedProcess]
) -> None:
    env = {"SPINDLE_GATEWAY_PORT": str(free_port()), "SPINDLE_AUTH_SECRET": ""}
    gateway = spindle_part("gateway", tmp_path, env)
    part.append(gateway)
    assert gateway.proc is not None
    assert gateway.proc.wait(timeout=60) != 0
    assert "SPINDLE_AUTH_SECRET must be set" in gateway.log_tail()
