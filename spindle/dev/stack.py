"""``spindle dev``: the embedded default stack in one command, no Docker.

It starts, on loopback by default and each on its own port:

1. a real Temporal dev server (SQLite file in the data dir, Web UI on),
2. Redis — the server named by ``SPINDLE_REDIS_URL``/``REDIS_URL``, else an
   embedded ``redis-server``,
3. MongoDB — the server named by ``SPINDLE_MONGO_URL``/``MONGO_URL``, else the
   embedded ``nx-27017`` wire-protocol server,
4. the worker and the gateway as child processes,

registers the example graphs, prints the addresses, and on Ctrl-C or SIGTERM
stops everything in reverse order (SIGTERM, then SIGKILL). Each child's output
goes to ``<data dir>/logs/<name>.log``; when a child dies, the tail of its log
is printed and the rest of the stack is stopped.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from pydantic import AliasChoices

from spindle.dev.auth import dev_admin_key, dev_auth_secret
from spindle.dev.config import DevConfig, DevStackError, check_ports_free
from spindle.dev.embedded import (
    mongo_wire_server,
    redis_binary,
    redis_server,
    temporal_dev_server,
)
from spindle.dev.processes import ManagedProcess, ProcessFailed, port_open, python_module
from spindle.dev.state import remove_state, write_state
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.platform.settings import Settings

# How long a child gets between SIGTERM and SIGKILL.
STOP_TIMEOUT_SECONDS = 10.0


def stack_overrides(config: DevConfig) -> dict[str, Any]:
    """The ``Settings`` fields the dev stack decides for its worker and gateway."""
    if config.auth:
        auth: dict[str, Any] = {
            "auth_disabled": False,
            "auth_secret": dev_auth_secret(config.data_dir),
        }
    else:
        # The embedded default is a single-user development stack; the banner
        # and the gateway's log both say so loudly.
        auth = {"auth_disabled": True}
    return {
        "temporal_address": config.temporal_address,
        "temporal_ui_url": config.temporal_ui_url,
        "redis_url": config.effective_redis_url,
        "mongo_url": config.effective_mongo_url,
        "gateway_host": config.host,
        "gateway_port": config.gateway_port,
        "worker_metrics_port": config.worker_metrics_port,
        **auth,
        # Push callbacks to a receiver on this machine are what local development
        # needs; the banner says loopback is allowed (docs/protocols/outbound.md).
        "outbound_allow": DEV_OUTBOUND_ALLOW,
    }


# The outbound policy refuses loopback; the dev stack lets it through (only it).
DEV_OUTBOUND_ALLOW = "127.0.0.0/8,::1/128,localhost"

# Demo pacing of the offline model, so that `spindle dev` shows an answer arriving
# token by token; the environment's own value wins.
DEV_OFFLINE_TOKEN_DELAY_MS = "20"


def child_env(config: DevConfig) -> dict[str, str]:
    """Environment for the worker and gateway children (on top of ours)."""
    env = {"PYTHONUNBUFFERED": "1"}
    if "SPINDLE_OFFLINE_TOKEN_DELAY_MS" not in os.environ:
        env["SPINDLE_OFFLINE_TOKEN_DELAY_MS"] = DEV_OFFLINE_TOKEN_DELAY_MS
    for name, value in stack_overrides(config).items():
        alias = Settings.model_fields[name].validation_alias
        # The first alias is the SPINDLE_ one, which wins over the plain names.
        assert isinstance(alias, AliasChoices), name
        env[str(alias.choices[0])] = str(value)
    return env


def http_ok(url: str, timeout: float = 2.0) -> bool:
    """True when ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


async def _wait_for_worker_polling(
    settings: Settings, pid: int, alive: Callable[[], bool], within: float
) -> None:
    """Until a worker with process id ``pid`` polls the task queue."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    from spindle.shared.temporal.client import connect_temporal

    client = await connect_temporal(settings)
    request = DescribeTaskQueueRequest(
        namespace=settings.temporal_namespace,
        task_queue=TaskQueue(name=settings.task_queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    # The SDK's default identity is "<pid>@<host>"; matching on the pid ignores
    # pollers of an earlier run that Temporal still remembers.
    prefix = f"{pid}@"
    deadline = time.monotonic() + within
    while True:
        response = await client.workflow_service.describe_task_queue(request)
        if any(poller.identity.startswith(prefix) for poller in response.pollers):
            return
        if not alive():
            raise ProcessFailed("worker exited before it was ready")
        if time.monotonic() > deadline:
            raise ProcessFailed(f"worker not polling task queue after {within:.0f}s")
        await asyncio.sleep(0.1)


def register_examples(settings: Settings) -> list[str]:
    """Store the example graphs (worker/examples) in the archive."""
    from spindle.shared.store.graph_registry import register_graphs
    from spindle.worker.examples import examples_with_origin

    return asyncio.run(register_graphs(settings, examples_with_origin()))


@dataclass
class DevStack:
    """The processes of ``spindle dev``, started and stopped together."""

    config: DevConfig
    out: TextIO = field(default_factory=lambda: sys.stdout)
    processes: list[ManagedProcess] = field(default_factory=list)
    example_graphs: list[str] = field(default_factory=list)
    admin_key: str | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    @property
    def logs_dir(self) -> Path:
        return self.config.data_dir / "logs"

    def settings(self) -> Settings:
        return Settings(**stack_overrides(self.config))

    def _spawn(self, process: ManagedProcess) -> ManagedProcess:
        # Listed before spawning, so an interrupt right after still stops it.
        self.processes.append(process)
        return process.start(wait=False)

    def start(self) -> None:
        """Start every part; returns when the gateway answers and the worker polls.

        Raises:
            ProcessFailed: a part did not start (message ends with its log tail).
            SpindleError: the example graphs could not be registered.
        """
        cfg = self.config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        temporal = temporal_dev_server(
            cfg.data_dir / "temporal",
            host=cfg.host,
            port=cfg.temporal_port,
            ui_port=cfg.temporal_ui_port,
            log_path=self.logs_dir / "temporal.log",
        )
        # The dev server answers gRPC a moment before its Web UI: wait for both.
        temporal.process.ready = lambda: (
            port_open(cfg.connect_host, cfg.temporal_port)
            and port_open(cfg.connect_host, cfg.temporal_ui_port)
        )
        servers = [temporal.process]
        self.say(f"starting Temporal dev server on {cfg.temporal_address}")
        if cfg.redis_url is None:
            binary = Path(redis_binary()).name
            self.say(f"starting embedded Redis ({binary}) on {cfg.connect_host}:{cfg.redis_port}")
            servers.append(
                redis_server(
                    cfg.data_dir / "redis",
                    host=cfg.host,
                    port=cfg.redis_port,
                    log_path=self.logs_dir / "redis.log",
                )
            )
        if cfg.mongo_url is None:
            self.say(f"starting embedded MongoDB (nx-27017) on {cfg.connect_host}:{cfg.mongo_port}")
            servers.append(
                mongo_wire_server(
                    cfg.data_dir / "mongo",
                    host=cfg.host,
                    port=cfg.mongo_port,
                    log_path=self.logs_dir / "mongo.log",
                )
            )
        for process in servers:
            self._spawn(process)
        for process in servers:
            process.wait_ready()

        settings = self.settings()
        self.example_graphs = register_examples(settings)
        if cfg.auth:
            self.admin_key = dev_admin_key(settings, cfg.data_dir)

        env = child_env(cfg)
        worker = ManagedProcess(
            "worker",
            python_module("spindle.worker.main"),
            log_path=self.logs_dir / "worker.log",
            env=env,
        )
        gateway = ManagedProcess(
            "gateway",
            python_module("spindle.gateway.main"),
            log_path=self.logs_dir / "gateway.log",
            env=env,
            ready=lambda: http_ok(f"{cfg.gateway_url}/healthz"),
            ready_timeout=60,
        )
        self.say("starting worker and gateway")
        self._spawn(worker)
        self._spawn(gateway)
        gateway.wait_ready()
        try:
            asyncio.run(_wait_for_worker_polling(settings, worker.pid or 0, worker.alive, 60))
        except ProcessFailed as exc:
            raise ProcessFailed(f"{exc}; log {worker.log_path}:\n{worker.log_tail()}") from exc

    def watch(self, interval: float = 0.5) -> ManagedProcess:
        """Block until a child exits, and return it."""
        while True:
            for process in self.processes:
                if not process.alive():
                    return process
            time.sleep(interval)

    def stop(self) -> None:
        """Stop every child, last started first."""
        for process in reversed(self.processes):
            if process.alive():
                self.say(f"stopping {process.name}")
            process.stop(timeout=STOP_TIMEOUT_SECONDS)

    def banner(self) -> str:
        from spindle.shared.platform.logging_setup import redact_url

        cfg = self.config
        redis_note = "" if cfg.redis_url else " (embedded)"
        mongo_note = "" if cfg.mongo_url else " (embedded nx-27017)"
        rows = [
            ("Gateway", cfg.gateway_url),
            ("Conversation page", f"{cfg.gateway_url}/ui/"),
            ("API docs (OpenAPI)", f"{cfg.gateway_url}/docs"),
            ("Temporal UI", cfg.temporal_ui_url),
            ("Temporal (gRPC)", cfg.temporal_address),
            ("Redis", redact_url(cfg.effective_redis_url) + redis_note),
            ("MongoDB", redact_url(cfg.effective_mongo_url) + mongo_note),
            ("Worker metrics", self._metrics_row()),
            ("Example graphs", ", ".join(self.example_graphs) or "(none)"),
            ("Data and logs", f"{cfg.data_dir.resolve()}"),
            ("Stack file", f"{cfg.data_dir.resolve() / 'stack.json'} (the spindle CLI reads it)"),
            ("Push callbacks", f"loopback allowed (SPINDLE_OUTBOUND_ALLOW={DEV_OUTBOUND_ALLOW})"),
        ]
        width = max(len(label) for label, _ in rows)
        lines = ["", "Spindle is running."]
        lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
        lines += ["", *self._auth_lines(), "", "Press Ctrl-C to stop.", ""]
        return "\n".join(lines)

    def _metrics_row(self) -> str:
        port = self.config.worker_metrics_port
        if port == 0:
            return "off"
        host = self.config.connect_host
        return f"http://{host}:{port}/metrics (Temporal SDK: http://{host}:{port + 1}/metrics)"

    def _auth_lines(self) -> list[str]:
        if self.admin_key is None:
            return [
                "  WARNING: authentication is OFF (development stack): every request acts as",
                "  user 'dev' of tenant 'default'. Do not expose these ports to anyone else.",
            ]
        return [
            "  Authentication is ON. Admin API key (user 'admin' of tenant 'default', role",
            f"  admin; kept in {self.config.data_dir.resolve() / 'auth'}):",
            f"    {self.admin_key}",
            f"  e.g. curl -H 'Authorization: Bearer {self.admin_key}' \\",
            f"         {self.config.gateway_url}/runs",
            "  More keys: spindle keys create (see docs/operations/threat-model.md).",
        ]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run_dev(config: DevConfig, *, out: TextIO | None = None) -> int:
    """Run the dev stack until Ctrl-C / SIGTERM or until a child dies.

    Returns:
        0 after a requested stop, 1 when a part failed to start or died.

    Raises:
        DevStackError: a port is taken or invalid (nothing was started).
    """
    check_ports_free(config)
    stack = DevStack(config, out=out or sys.stdout)
    # SIGINT explicitly too: a shell starts background jobs with SIGINT ignored,
    # and `kill -INT` must still stop the stack.
    previous_term = signal.signal(signal.SIGTERM, _interrupt)
    previous_int = signal.signal(signal.SIGINT, _interrupt)
    try:
        try:
            stack.start()
        except (ProcessFailed, DevStackError, SpindleError) as exc:
            stack.say(f"spindle dev: could not start: {exc}")
            return 1
        # The other spindle commands find this stack through it (spindle.dev.state).
        write_state(config)
        stack.say(stack.banner())
        dead = stack.watch()
        code = dead.proc.returncode if dead.proc else None
        stack.say(
            f"spindle dev: {dead.name} exited (code {code}); last lines of {dead.log_path}:\n"
            f"{dead.log_tail()}"
        )
        return 1
    except KeyboardInterrupt:
        stack.say("spindle dev: stopping")
        return 0
    finally:
        # A second Ctrl-C must not cut the shutdown short and orphan children.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        remove_state(config.data_dir)
        stack.stop()
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
        stack.say("spindle dev: stopped")
