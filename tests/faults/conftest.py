"""The fault-injection stack: private servers that tests kill and restart, and
a worker and a gateway of their own pointed at them.

``fault_stack`` starts once for the folder: a Temporal dev server with its
SQLite file, a redis-server with an append-only file, an nx-27017, then the
worker and gateway subprocesses. Every server keeps its state on disk, so a
restart is a restart, not a fresh server. A test that breaks a server brings it
back in a ``finally`` and each test first waits until the gateway is ready, so
one failing test does not take the others down with it. The gateway runs with
auth off (``SPINDLE_AUTH_DISABLED``): what these tests exercise is the faults.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from spindle.dev.embedded import TemporalDevServer, mongo_wire_server, temporal_dev_server
from spindle.dev.processes import ManagedProcess, free_port, port_open
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import SpindleStack, example_graph, running_stack
from tests.e2e.sse_client import SseConnection, SseEvent, StreamEnded, open_sse
from tests.polling import eventually

# An activity whose completion a restart lost is retried only once its
# start-to-close timeout passes: keep that wait short.
NODE_TIMEOUT_SECONDS = 10


def private_redis(data_dir: Path) -> ManagedProcess:
    """A redis-server with an append-only file, so its data survives a restart
    (including a SIGKILL: Redis writes the file before it answers)."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    data_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", "always", "--dir", str(data_dir)]
    return ManagedProcess(
        "private redis-server",
        argv,
        log_path=data_dir / "redis.log",
        ready=lambda: port_open("127.0.0.1", port),
        ready_timeout=30,
    )


def server_port(proc: ManagedProcess) -> int:
    return int(proc.argv[proc.argv.index("--port") + 1])


@asynccontextmanager
async def gateway_client(stack: SpindleStack) -> AsyncIterator[httpx.AsyncClient]:
    timeout = httpx.Timeout(30.0, connect=5.0)
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=timeout) as client:
        yield client


@dataclass
class FaultStack:
    """The private servers, the worker and gateway on them, and a client of each."""

    temporal_server: TemporalDevServer
    redis: ManagedProcess
    mongo: ManagedProcess
    spindle: SpindleStack
    http: httpx.AsyncClient

    @property
    def settings(self) -> Settings:
        return self.spindle.settings

    @property
    def temporal(self) -> Client:
        return self.spindle.temporal


@pytest.fixture(scope="session")
async def fault_stack(
    tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path
) -> AsyncIterator[FaultStack]:
    data = tmp_path_factory.mktemp("faults")
    logs = artifacts_dir / "faults"
    temporal_server = temporal_dev_server(
        data / "temporal", port=free_port(), ui_port=None, log_path=logs / "temporal.log"
    )
    redis = private_redis(data / "redis")
    mongo = mongo_wire_server(data / "mongo", port=free_port(), log_path=logs / "mongo.log")
    servers = [temporal_server.process, redis, mongo]
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready()
        settings = Settings(
            temporal_address=temporal_server.address,
            redis_url=f"redis://127.0.0.1:{server_port(redis)}/0",
            mongo_url=f"mongodb://127.0.0.1:{server_port(mongo)}",
            mongo_db="spindle_faults",
            task_queue="spindle-faults",
            llm_provider="offline",
            gateway_host="127.0.0.1",
            gateway_port=free_port(),
            sse_keepalive_seconds=1.0,
            auth_disabled=True,
        )
        temporal = await eventually(
            lambda: _connect(settings), what="the private Temporal answers", timeout=30
        )
        async with (
            running_stack(settings, temporal, logs) as spindle,
            gateway_client(spindle) as http,
        ):
            yield FaultStack(temporal_server, redis, mongo, spindle, http)
    finally:
        for server in servers:
            server.stop()


async def _connect(settings: Settings) -> Client | None:
    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=pydantic_data_converter,
        )
    except RuntimeError:
        return None


def approval_graph(name: str) -> dict[str, Any]:
    """The approval-flow example under another name, with short node timeouts."""
    spec = {**example_graph("approval-flow"), "name": name}
    spec["nodes"] = [{**node, "timeout_seconds": NODE_TIMEOUT_SECONDS} for node in spec["nodes"]]
    return spec


async def read_until_dropped(sse: SseConnection, timeout: float) -> list[SseEvent]:
    """Read until the server ends the response or the connection breaks."""
    start = len(sse.events)
    try:
        while True:
            await sse.next_item(timeout)
    except (StreamEnded, httpx.TransportError):
        pass
    return sse.events[start:]


async def resume_to_end(
    http: httpx.AsyncClient, stream_url: str, last_event_id: str, *, timeout: float = 60
) -> list[SseEvent]:
    """Reconnect with ``Last-Event-ID`` (as EventSource does, until the gateway
    answers 200) and read the rest of the conversation."""
    async with open_sse(http, stream_url, headers={"Last-Event-ID": last_event_id}) as sse:
        assert sse.response.status_code == 200, await sse.response.aread()
        events = await sse.read_to_end(timeout=timeout)
        assert sse.ended, "the stream ends after the conversation's last message"
    return events


async def wait_ready(http: httpx.AsyncClient, timeout: float = 30) -> None:
    """Until the gateway says Temporal, Redis and MongoDB all answer."""

    async def ready() -> bool:
        try:
            return (await http.get("/readyz")).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(ready, what="gateway ready", timeout=timeout, interval=0.1)


__all__ = [
    "FaultStack",
    "approval_graph",
    "gateway_client",
    "private_redis",
    "read_until_dropped",
    "resume_to_end",
    "running_stack",
    "server_port",
    "wait_ready",
]
