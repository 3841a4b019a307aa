"""``spindle runs timeline`` as a user runs it: against the e2e stack's gateway,
with a URL and an API key and no way to reach MongoDB, Temporal or Redis."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from spindle.client import AsyncSpindleClient, ClientConfig
from tests.cli_runner import run_spindle
from tests.e2e.conftest import Caller, SpindleStack
from tests.polling import eventually

pytestmark = pytest.mark.e2e

# The settings that would let the command reach a server itself (both spellings).
SERVER_VARIABLES = ("MONGO", "TEMPORAL", "REDIS")


def user_env(stack: SpindleStack, caller: Caller) -> dict[str, str]:
    """A user's environment: the gateway's address and a key, no server settings."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not any(server in name for server in SERVER_VARIABLES)
    }
    return {**kept, "SPINDLE_URL": stack.base_url, "SPINDLE_API_KEY": caller.key}


def spindle(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Another directory than the repository's: no .env to fall back on.
    return run_spindle(*args, environ=env, cwd=cwd)


@pytest.fixture(scope="module")
async def finished_pipeline(
    stack: SpindleStack, callers: dict[str, Caller], examples: list[str]
) -> dict[str, Any]:
    """A completed ``pipeline`` run of alice's, as its bundle describes it."""
    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    async with AsyncSpindleClient(config) as client:
        run = await client.start_run("pipeline", input={"text": "Terrible outage, angry users"})

        async def completed() -> bool:
            return (await client.get_run(run)).status == "completed"

        await eventually(completed, what="the pipeline run completes", timeout=60)
        bundle = await client.bundle(run)
    return bundle.model_dump(mode="json")


async def test_timeline_prints_each_node_from_the_gateway(
    stack: SpindleStack,
    callers: dict[str, Caller],
    finished_pipeline: dict[str, Any],
    tmp_path: Path,
) -> None:
    env = user_env(stack, callers["alice"])
    assert not any("MONGO" in name for name in env)
    workflow_id = finished_pipeline["run"]["workflow_id"]

    as_json = await asyncio.to_thread(
        spindle, env, tmp_path, "runs", "timeline", workflow_id, "--json"
    )
    assert as_json.returncode == 0, as_json.stderr
    reports = orjson.loads(as_json.stdout)
    nodes = [r["node_id"] for r in reports]
    assert nodes == [r["node_id"] for r in finished_pipeline["node_reports"]]
    assert "keywords" in nodes and len(nodes) >= 3
    # Every node decided has a report: the branch not taken is SKIPPED and ran nothing.
    ran = [r for r in reports if r["status"] != "SKIPPED"]
    assert [r["status"] for r in reports].count("SKIPPED") == 1
    assert all(r["status"] == "SUCCESS" for r in ran)
    assert all(r["input"] is not None and r["output"] is not None for r in ran)

    table = await asyncio.to_thread(spindle, env, tmp_path, "runs", "timeline", workflow_id)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NODE", "STATUS", "DURATION", "INPUT", "OUTPUT"]
    assert [row.split()[0] for row in rows] == nodes
    keywords = next(row for row in rows if row.startswith("keywords"))
    assert "keywords (tool)" in keywords and "SUCCESS" in keywords and " ms" in keywords
    assert "outage" in keywords  # the node's input text, summarised


async def test_timeline_of_an_unknown_or_hidden_run_is_an_error(
    stack: SpindleStack,
    callers: dict[str, Caller],
    finished_pipeline: dict[str, Any],
    tmp_path: Path,
) -> None:
    unknown = await asyncio.to_thread(
        spindle, user_env(stack, callers["alice"]), tmp_path, "runs", "timeline", "no-such-run-x"
    )
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("spindle: error: ") and "no-such-run-x" in unknown.stderr

    # Another tenant's run is not found either: the gateway checks who asks.
    hidden = await asyncio.to_thread(
        spindle,
        user_env(stack, callers["mallory"]),
        tmp_path,
        "runs",
        "timeline",
        finished_pipeline["run"]["workflow_id"],
    )
    assert hidden.returncode == 1
    assert hidden.stderr.startswith("spindle: error: ")
    assert "Traceback" not in hidden.stderr
