"""The benchmark's own stack: a tuned Temporal dev server, Redis and the Mongo
wire server on free loopback ports, plus gateway and worker processes started
on demand (the same ``python -m spindle.gateway.main`` / ``python -m spindle.worker.main`` a
deployment runs).

The environment turns auth off and raises the per-tenant limits: the benchmark
measures the message path, not the limiter or key checks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from spindle.dev.embedded import mongo_wire_server, redis_server, temporal_dev_server
from spindle.dev.processes import ManagedProcess, free_port, python_module
from tests.polling import eventually

REPO_ROOT = Path(__file__).resolve().parents[2]
LOGS = REPO_ROOT / "test-artifacts" / "bench-logs"

# Limits far above anything a benchmark does (the settings' own floors are 1).
BENCH_LIMITS = {
    "SPINDLE_AUTH_DISABLED": "true",
    "SPINDLE_RATE_LIMIT_RUN_STARTS": "100000",
    "SPINDLE_RATE_LIMIT_SIGNALS": "100000",
    "SPINDLE_MAX_STREAMS_PER_TENANT": "100000",
    "SPINDLE_WORKER_METRICS_PORT": "0",  # several bench workers: no port clashes
}


@dataclass
class BenchStack:
    """Running servers, their environment, and the processes started on them."""

    logs: Path
    temporal_address: str
    env: dict[str, str]
    processes: list[ManagedProcess] = field(default_factory=list)

    def gateway(self, name: str, *, task_queue: str | None = None) -> tuple[ManagedProcess, str]:
        """Start a gateway process on a fresh port; return it and its base URL."""
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        env = {**self.env, "SPINDLE_GATEWAY_PORT": str(port)}
        if task_queue:
            env["SPINDLE_TASK_QUEUE"] = task_queue
        proc = ManagedProcess(
            name,
            python_module("spindle.gateway.main"),
            log_path=self.logs / f"{name}.log",
            env=env,
            cwd=REPO_ROOT,
            ready=lambda: _healthy(f"{base}/healthz"),
            ready_timeout=60,
        )
        self.processes.append(proc)
        return proc.start(), base

    async def worker(self, name: str, client: Client, *, task_queue: str) -> ManagedProcess:
        """Start a worker process and wait until it polls both task-queue types."""
        env = {**self.env, "SPINDLE_TASK_QUEUE": task_queue}
        proc = ManagedProcess(
            name,
            python_module("spindle.worker.main"),
            log_path=self.logs / f"{name}.log",
            env=env,
            cwd=REPO_ROOT,
        )
        self.processes.append(proc)
        proc.start()
        assert proc.pid is not None
        prefix = f"{proc.pid}@"  # the SDK's default identity is <pid>@<host>

        async def polling_both() -> bool:
            for kind in (
                TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
                TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            ):
                reply = await client.workflow_service.describe_task_queue(
                    DescribeTaskQueueRequest(
                        namespace=client.namespace,
                        task_queue=TaskQueue(name=task_queue),
                        task_queue_type=kind,
                    )
                )
                if not any(p.identity.startswith(prefix) for p in reply.pollers):
                    return False
            return True

        try:
            # The annotation tells mypy the probe's type (inference fails on the union).
            polled: bool = await eventually(
                polling_both, what=f"{name} polls {task_queue}", timeout=60, alive=proc.alive
            )
        except AssertionError as exc:
            raise RuntimeError(f"{exc}\n{proc.log_tail()}") from exc
        assert polled
        return proc


@contextmanager
def bench_stack() -> Iterator[BenchStack]:
    """Start Temporal, Redis and the Mongo wire server; stop everything on exit.

    Also exports the stack's environment to this process, so ``Settings()``
    here reads the same servers as the child processes. Data lives in a
    temporary directory; every process logs to ``test-artifacts/bench-logs/``
    (emptied first), which outlives the run.
    """
    shutil.rmtree(LOGS, ignore_errors=True)
    LOGS.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="spindle-bench-") as tmp:
        root = Path(tmp)
        temporal = temporal_dev_server(
            root / "temporal", port=free_port(), ui_port=None, log_path=LOGS / "temporal.log"
        )
        redis_port, mongo_port = free_port(), free_port()
        servers = [
            temporal.process,
            redis_server(root / "redis", port=redis_port, log_path=LOGS / "redis.log"),
            mongo_wire_server(root / "mongo", port=mongo_port, log_path=LOGS / "mongo.log"),
        ]
        env = {
            "SPINDLE_TEMPORAL_ADDRESS": temporal.address,
            "SPINDLE_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
            "SPINDLE_MONGO_URL": f"mongodb://127.0.0.1:{mongo_port}",
            "SPINDLE_MONGO_DB": "spindle_bench",
            "SPINDLE_LLM_PROVIDER": "offline",
            "SPINDLE_LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            **BENCH_LIMITS,
        }
        os.environ.update(env)
        stack = BenchStack(LOGS, temporal.address, env, list(servers))
        try:
            for proc in servers:
                proc.start(wait=False)
            for proc in servers:
                proc.wait_ready()
            yield stack
        finally:
            for proc in reversed(stack.processes):
                proc.stop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
