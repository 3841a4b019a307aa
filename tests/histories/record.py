"""(Re)record the example run histories in this folder.

Runs the example graphs on a fresh dev server with the real worker (through the
pytest session fixtures) and writes ``<graph>.json`` here. Commit the files: the
replay tests check that every later version of ``GraphRun`` still replays them.

Usage: ``python tests/histories/record.py``
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    env = {**os.environ, "SPINDLE_RECORD_HISTORIES": "1"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/replay/test_record.py",
        "tests/replay/test_recorded_fork.py",
        "tests/e2e/test_evaluations.py::test_an_evaluation_of_three_runs_with_two_checks",
    ]
    sys.exit(subprocess.call(command, cwd=ROOT, env=env))
