"""The ``spindle`` commands find a ``spindle dev`` stack on non-default ports with no
variable set: through the stack file it writes in ``./.spindle`` (spindle.dev.state)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import httpx
import pytest

from spindle.dev.processes import wait_until
from spindle.worker import examples
from spindle.worker.examples import load_examples
from tests.cli_runner import run_spindle
from tests.integration.test_devstack import DevRun, descendants, http_status

EXAMPLES = Path(examples.__file__).parent
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(240)]


def spindle(run: DevRun, *args: str) -> str:
    """``spindle ARGS`` beside the stack, as its user would type it: no SPINDLE_* set."""
    done = run_spindle(*args, environ=run.env, cwd=run.cwd)
    assert done.returncode == 0, f"spindle {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_every_command_finds_the_dev_stack_with_no_variable(tmp_path: Path) -> None:
    run = DevRun(tmp_path, default_data_dir=True)
    try:
        run.wait_ready()
        metrics = run.url("worker_metrics_port", "/metrics")
        assert metrics in run.output, run.output
        assert http_status(metrics) == 200
        state = json.loads((run.data_dir / "stack.json").read_text())
        assert state["gateway_url"] == run.url("gateway_port")
        assert state["mongo_url"] == f"mongodb://127.0.0.1:{run.ports['mongo_port']}"

        # The registry and the keys: list reads MongoDB; register and keys go through
        # the stack's gateway (its stack file), or MongoDB with --direct.
        listed = spindle(run, "graphs", "list")
        for example in load_examples():
            assert example.name in listed
        extra = tmp_path / "cli-extra.yaml"
        extra.write_text(
            (EXAMPLES / "pipeline.yaml").read_text().replace("pipeline", "cli-extra", 1)
        )
        assert "cli-extra" in spindle(run, "graphs", "register", str(extra))
        key = spindle(run, "keys", "create", "--tenant", "default", "--user", "bob").strip()
        assert key.startswith("spk_")
        assert "bob" in spindle(run, "keys", "list")
        direct = spindle(run, "keys", "create", "--direct", "--tenant", "t2", "--user", "ann")
        assert direct.startswith("spk_")
        assert "ann" in spindle(run, "keys", "list", "--direct", "--tenant", "t2")
        assert "ann" not in spindle(run, "keys", "list"), "the gateway: its tenant's only"

        # The gateway (client SDK): a run started over HTTP, seen by the CLI.
        gateway = run.url("gateway_port")
        started = httpx.post(
            f"{gateway}/runs",
            json={"graph": "pipeline", "input": {"text": "a great day"}},
            timeout=10,
        )
        assert started.status_code == 201, started.text
        workflow_id = started.json()["workflow_id"]
        assert workflow_id in spindle(run, "runs", "list")

        def completed() -> bool:
            return "completed" in spindle(run, "runs", "describe", workflow_id)

        wait_until(completed, timeout=30, what="the pipeline run to complete", interval=0.5)

        # Temporal (direct): replay the run's history with this code.
        assert "replayed" in spindle(run, "runs", "replay", workflow_id).lower()
        every_other_command(run, workflow_id)

        run.proc.send_signal(signal.SIGINT)
        assert run.wait_exit() == 0, run.output
        assert not (run.data_dir / "stack.json").exists()
    finally:
        if run.running() or descendants(run.proc.pid):
            run.kill_all()


def every_other_command(run: DevRun, finished: str) -> None:
    """The remaining subcommands, each beside the stack with no variable set."""
    gateway = run.url("gateway_port")
    timeline = spindle(run, "runs", "timeline", finished)
    for node in ("keywords", "mood", "summary"):
        assert node in timeline, timeline
    chatted = spindle(run, "chat", "pipeline", "--input", '{"text": "a calm day"}', "--plain")
    assert "completed" in chatted.lower(), chatted

    # A run waiting at its prompt, cancelled from the CLI.
    started = httpx.post(
        f"{gateway}/runs", json={"graph": "approval-flow", "input": {"topic": "cli"}}, timeout=10
    )
    assert started.status_code == 201, started.text
    waiting = started.json()["workflow_id"]
    wait_until(
        lambda: "paused" in spindle(run, "runs", "describe", waiting),
        timeout=30,
        what="the approval run to wait",
        interval=0.5,
    )
    spindle(run, "runs", "cancel", waiting)
    wait_until(
        lambda: "canceled" in spindle(run, "runs", "describe", waiting),
        timeout=30,
        what="the approval run to be canceled",
        interval=0.5,
    )

    [row] = [line for line in spindle(run, "keys", "list").splitlines() if " bob " in line]
    assert "revoked key" in spindle(run, "keys", "revoke", row.split()[0])

    schedule = ("nightly",)
    spindle(
        run, "schedules", "create", *schedule, "--graph", "pipeline", "--every", "3600",
        "--input", '{"text": "nightly"}',
    )  # fmt: skip
    assert "nightly" in spindle(run, "schedules", "list")
    spindle(run, "schedules", "pause", *schedule)
    paused = spindle(run, "schedules", "get", *schedule)
    assert re.search(r"^state\s+paused$", paused, re.M), paused
    assert re.search(r"^next\s+-$", paused, re.M), "a paused schedule lists no next runs"
    spindle(run, "schedules", "unpause", *schedule)
    assert not re.search(r"^next\s+-$", spindle(run, "schedules", "get", *schedule), re.M)
    spindle(run, "schedules", "trigger", *schedule)
    spindle(run, "schedules", "delete", *schedule)
    assert "nightly" not in spindle(run, "schedules", "list")

    pruned = spindle(run, "archive", "prune", "--older-than-days", "30", "--dry-run")
    assert "runs" in pruned, pruned
