"""Child processes that Spindle starts and stops: servers of the embedded default,
the worker and the gateway. Used by ``spindle dev`` and by the test suite, so the
embedded default is what the tests exercise."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class ProcessFailed(RuntimeError):
    """A child process exited or did not become ready in time."""


_HANDED_OUT: set[int] = set()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now, never the same one twice per process.

    The kernel may hand back a port it just gave us once our probe socket is
    closed, so two calls in a row could name the same port for two servers;
    remembering what we handed out rules that out.
    """
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((host, 0))
            port = int(sock.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port
    raise OSError("no fresh free TCP port after 100 tries")


def free_port_pair(host: str = "127.0.0.1") -> int:
    """A free port P whose P + 1 is free too (worker metrics: ours on P, the SDK's on
    P + 1); neither is handed out again by ``free_port``."""
    for _ in range(100):
        port = free_port(host)
        if port + 1 in _HANDED_OUT or port >= 65535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((host, port + 1))
            except OSError:
                continue
        _HANDED_OUT.add(port + 1)
        return port
    raise OSError("no two free TCP ports in a row after 100 tries")


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    alive: Callable[[], bool] | None = None,
    interval: float = 0.05,
) -> None:
    """Poll ``ready`` until it holds, with a deadline.

    Raises:
        ProcessFailed: ``alive`` turned false, or the deadline passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return
        if alive is not None and not alive():
            raise ProcessFailed(f"{what} exited before it was ready")
        if time.monotonic() > deadline:
            raise ProcessFailed(f"{what} not ready after {timeout:.0f}s")
        time.sleep(interval)


class ManagedProcess:
    """One child process with a log file, a readiness check and clean stop."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log_path: Path,
        env: dict[str, str] | None = None,
        ready: Callable[[], bool] | None = None,
        ready_timeout: float = 60.0,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.ready = ready
        self.ready_timeout = ready_timeout
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *, wait: bool = True) -> ManagedProcess:
        """Spawn the process; with ``wait`` (the default) also ``wait_ready``.

        Pass ``wait=False`` to start several processes at once and then wait for
        each, so their start-up times overlap.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        env = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(
            self.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=self.cwd,
            start_new_session=True,  # Ctrl-C in a terminal reaches only the parent
        )
        log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Block until the readiness check holds.

        Raises:
            ProcessFailed: the process exited or missed its deadline; it is
                stopped, and the message ends with the tail of its log.
        """
        if self.ready is None:
            return
        try:
            wait_until(self.ready, timeout=self.ready_timeout, what=self.name, alive=self.alive)
        except ProcessFailed as exc:
            tail = self.log_tail()
            self.stop()
            raise ProcessFailed(f"{exc}; log {self.log_path}:\n{tail}") from exc

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``."""
        if not self.alive():
            return
        assert self.proc is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the whole process group at once (a crash, for fault tests)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> ManagedProcess:
        self.stop()
        return self.start()


def python_module(module: str, *args: str) -> list[str]:
    """argv to run a module with this interpreter."""
    return [sys.executable, "-m", module, *args]


def bin_path(name: str) -> str:
    """A console script installed beside this interpreter, else on PATH."""
    import shutil

    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise ProcessFailed(f"'{name}' is not installed (pip install the project)")
    return found
