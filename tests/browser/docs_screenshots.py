"""Copy the browser tests' screenshots that the docs show into ``docs/images/``.

The pictures in docs/streaming/web-page.md are the screenshots the browser tests
take (``OpenPage.screenshot``: ``test-artifacts/browser/<name>.png``), so they show
the pages as the tests left them. After changing a page::

    .venv/bin/python tests/browser/docs_screenshots.py --run   # run the tests, then copy
    .venv/bin/python tests/browser/docs_screenshots.py         # copy the last run's

A screenshot that is missing is named, and the script exits 1 (nothing is copied
half-way: every source is checked first).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artifacts" / "browser"
IMAGES = REPO / "docs" / "images"

# docs/images/<name> <- test-artifacts/browser/<screenshot>, and the test that takes it.
PICTURES: dict[str, tuple[str, str]] = {
    "web-conversation.png": ("conversation-complete.png", "test_conversation_page.py"),
    "web-conversation-workstreams.png": (
        "conversation-workstreams.png",
        "test_page_workstreams_files.py",
    ),
    "web-conversation-delegation.png": (
        "conversation-delegation.png",
        "test_page_workstreams_files.py",
    ),
    "web-conversation-phone.png": ("conversation-phone.png", "test_conversation_page.py"),
    "web-embed-example.png": ("component-conversation.png", "test_conversation_component.py"),
    "web-runs-list.png": ("runs-list-1280.png", "test_runs_studio.py"),
    "web-run-graph.png": ("run-graph-completed.png", "test_runs_studio.py"),
    "web-run-inspector.png": ("run-inspector-agent.png", "test_runs_studio.py"),
    "web-inbox.png": ("inbox-two-prompts.png", "test_inbox_page.py"),
    "web-inbox-phone.png": ("inbox-phone.png", "test_inbox_page.py"),
    "web-schedules.png": ("schedules-created.png", "test_schedules_page.py"),
    "web-schedules-paused.png": ("schedules-paused.png", "test_schedules_page.py"),
    "web-schedules-phone.png": ("schedules-phone.png", "test_schedules_page.py"),
    "web-compare.png": ("compare-fork.png", "test_compare_page.py"),
}


def run_tests() -> int:
    """The browser tests that take the pictures (pytest's exit code)."""
    files = sorted({f"tests/browser/{test}" for _, test in PICTURES.values()})
    return subprocess.call([sys.executable, "-m", "pytest", "-q", *files], cwd=REPO)


def copy() -> list[str]:
    """Copy every picture; the names of missing screenshots (nothing copied then)."""
    missing = [shot for shot, _ in PICTURES.values() if not (SHOTS / shot).is_file()]
    if missing:
        return missing
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name, (shot, _) in PICTURES.items():
        shutil.copyfile(SHOTS / shot, IMAGES / name)
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the browser tests first")
    args = parser.parse_args()
    if args.run and run_tests() != 0:
        print("the browser tests failed: nothing copied", file=sys.stderr)
        return 1
    missing = copy()
    if missing:
        print(f"missing in {SHOTS}: {', '.join(missing)} (run with --run)", file=sys.stderr)
        return 1
    for name in PICTURES:
        print(f"docs/images/{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
