"""The state file of a running ``spindle dev``: where each part of the stack listens.

``spindle dev`` writes ``<data dir>/stack.json`` once every part is up and removes
it when it stops. The other ``spindle`` commands read it (``spindle.cli.stack``)
when no flag, environment variable or ``.env`` entry names a server, so they find
the dev stack on whatever ports it was given, with no variable set
(docs/operations/cli.md, "How a command finds its servers"). A file whose
``spindle dev`` process is gone (killed without a chance to clean up) is ignored.

Standard library only: reading it must keep ``spindle --help`` instant.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spindle.dev.config import DATA_DIR_ENV, DEFAULT_DATA_DIR, DevConfig

STATE_FILE = "stack.json"


@dataclass(frozen=True)
class StackState:
    """Where a running dev stack's parts listen, as the state file holds it."""

    pid: int
    data_dir: str
    gateway_url: str
    temporal_address: str
    temporal_ui_url: str
    redis_url: str
    mongo_url: str
    worker_metrics_port: int
    auth: bool

    @classmethod
    def of(cls, config: DevConfig, pid: int) -> StackState:
        return cls(
            pid=pid,
            data_dir=str(config.data_dir.resolve()),
            gateway_url=config.gateway_url,
            temporal_address=config.temporal_address,
            temporal_ui_url=config.temporal_ui_url,
            redis_url=config.effective_redis_url,
            mongo_url=config.effective_mongo_url,
            worker_metrics_port=config.worker_metrics_port,
            auth=config.auth,
        )

    def settings(self) -> dict[str, Any]:
        """The ``Settings`` fields this stack decides for a command that reaches it."""
        return {
            "temporal_address": self.temporal_address,
            "temporal_ui_url": self.temporal_ui_url,
            "redis_url": self.redis_url,
            "mongo_url": self.mongo_url,
        }

    def admin_key(self) -> str | None:
        """The first admin API key of a stack started with ``--auth`` (spindle.dev.auth)."""
        if not self.auth:
            return None
        key_file = Path(self.data_dir) / "auth" / "admin-key"
        try:
            return key_file.read_text().strip() or None
        except OSError:
            return None


def state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def write_state(config: DevConfig, pid: int | None = None) -> Path:
    """Write the state file of the stack ``config`` describes (readable by the user only)."""
    path = state_path(config.data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = StackState.of(config, os.getpid() if pid is None else pid)
    temporary = path.with_suffix(".tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(asdict(state), out, indent=2)
    temporary.replace(path)
    return path


def remove_state(data_dir: Path, pid: int | None = None) -> None:
    """Remove the state file if it is this process's (another stack's stays)."""
    state = read_state(data_dir, require_alive=False)
    if state is not None and state.pid == (os.getpid() if pid is None else pid):
        state_path(data_dir).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_state(data_dir: Path, *, require_alive: bool = True) -> StackState | None:
    """The state of the stack whose data dir is ``data_dir``; None when there is none,
    the file is unreadable, or (``require_alive``) its process is gone."""
    try:
        raw = json.loads(state_path(data_dir).read_text())
        state = StackState(**raw)
    except (OSError, ValueError, TypeError):
        return None
    if require_alive and not _alive(state.pid):
        return None
    return state


def running_stack(environ: Mapping[str, str]) -> StackState | None:
    """The running dev stack of ``SPINDLE_DATA_DIR`` (else ``./.spindle``), if any."""
    data_dir = Path(environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)
    return read_state(data_dir)
