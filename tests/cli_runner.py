"""Run the installed ``spindle`` command as a user would, for CLI tests."""

from __future__ import annotations

import os
import subprocess

from spindle.dev.processes import bin_path


def run_spindle(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``spindle ARGS…`` with this process's environment plus ``env`` (e.g.
    ``SPINDLE_MONGO_DB="x"``); output captured as text, bounded to 60 s."""
    return subprocess.run(
        [bin_path("spindle"), *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
