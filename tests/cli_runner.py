"""Run the installed ``spindle`` command as a user would, for CLI tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

from spindle.dev.processes import bin_path


def run_spindle(
    *args: str,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``spindle ARGS…`` without a terminal, as a script would run it.

    The environment is ``environ`` (default: this process's) plus ``env`` (e.g.
    ``SPINDLE_MONGO_DB="x"``); ``stdin`` is fed as text; output is captured as
    text, bounded to 60 s.
    """
    return subprocess.run(
        [bin_path("spindle"), *args],
        check=False,
        capture_output=True,
        text=True,
        input=stdin,
        env={**(os.environ if environ is None else environ), **env},
        cwd=cwd,
        timeout=60,
    )
