"""(Re)record the example run histories in this folder.

Runs the example graphs on a fresh dev server with the real worker (through the
pytest session fixtures) and writes ``<graph>.json`` here, plus the histories of an
``Evaluation`` and a ``Conversation`` from the e2e tests that drive them. Commit the
files: the replay tests check that every later version of the workflows still
replays them.

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
        "tests/e2e/test_run_end.py::test_a_queued_run_cancelled_never_starts_and_the_next_moves_up",
        "tests/e2e/test_conversations.py::test_interrupt_stops_the_running_run_gracefully_then_starts",
        "tests/e2e/test_conversations.py::"
        "test_rollback_terminates_the_running_run_and_leaves_it_out_of_the_history",
    ]
    sys.exit(subprocess.call(command, cwd=ROOT, env=env))
