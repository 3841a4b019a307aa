"""An evaluation over archived runs at the issue's size, on the dev server: every run
forked with recorded tools (no tool runs again), compared and checked, the history
bounded by continue-as-new per page (docs/replay-and-compare.md#evaluations).

The size is ``EVALUATION_SCALE_RUNS`` (default 200, so CI stays within its
time; the 1,000-run figures in the docs come from running this with 1000, and the
benchmark's evaluations section measures 200).
"""

from __future__ import annotations

import os

import pytest
from temporalio.client import Client

from spindle.shared.platform.settings import Settings
from tests.bench.evaluations import evaluate_archived

pytestmark = pytest.mark.integration

RUNS = int(os.environ.get("EVALUATION_SCALE_RUNS", "200"))


@pytest.mark.timeout(1800)
async def test_an_evaluation_over_archived_runs_completes_with_no_live_tool_call(
    temporal_client: Client, settings: Settings
) -> None:
    figures = await evaluate_archived(temporal_client, settings, runs=RUNS, page_size=50)
    print("evaluation figures:", figures)
    assert figures["status"] == "completed", figures
    assert (figures["same"], figures["failed"], figures["pending"]) == (RUNS, 0, 0), figures
    assert figures["check_same_passed"] == RUNS
    assert figures["tool_executions"] == 0, figures  # every tool call answered from records
    assert figures["generations"] == -(-RUNS // 50)  # one per page
    assert figures["history_events_max"] <= 30 * 50 + 10, figures
