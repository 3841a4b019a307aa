"""Schedules over HTTP: a Temporal Schedule starts runs that look like any other run.

Runs are started with "trigger now" and backfills, never by waiting for a cron.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.cli_runner import run_spindle
from tests.e2e.conftest import REPO_ROOT, Caller, SpindleStack, client_for
from tests.e2e.run_driver import T, updates, wait_for_status
from tests.polling import eventually

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


def nightly(schedule_id: str, **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": schedule_id,
        "graph": "pipeline",
        "input": {"text": "scheduled digest"},
        "cron": "0 2 * * *",
        "time_zone": "Europe/Paris",
        "overlap": "skip",
        "note": "nightly digest",
    }
    body.update(changes)
    return body


async def create(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    reply = await http.post("/schedules", json=body)
    assert reply.status_code == 201, reply.text
    created: dict[str, Any] = reply.json()
    return created


async def recent_runs(http: httpx.AsyncClient, schedule_id: str, count: int) -> list[str]:
    """The workflow ids of the schedule's runs, once it has started ``count`` of them."""

    async def started() -> list[str] | None:
        reply = await http.get(f"/schedules/{schedule_id}")
        assert reply.status_code == 200, reply.text
        runs = [r["workflow_id"] for r in reply.json()["recent_runs"]]
        return runs if len(runs) >= count else None

    return await eventually(started, what=f"{count} runs of {schedule_id}", timeout=30)


async def test_a_triggered_schedule_runs_like_any_run(
    http: httpx.AsyncClient, examples: list[str], callers: dict[str, Caller], unique: str
) -> None:
    created = await create(http, nightly(f"digest-{unique}"))
    assert created["id"] == f"digest-{unique}"
    assert created["graph"] == "pipeline"
    assert created["cron"] == "0 2 * * *"
    assert created["time_zone"] == "Europe/Paris"
    assert created["paused"] is False
    assert created["next_runs"], "a cron schedule has its next start time"
    assert created["user_id"] == "alice"

    reply = await http.post(f"/schedules/digest-{unique}/trigger")
    assert reply.status_code == 202, reply.text
    [workflow_id] = await recent_runs(http, f"digest-{unique}", 1)

    done = await wait_for_status(http, workflow_id, {"completed"})
    assert done["graph_name"] == "pipeline"
    assert done["tenant_id"] == callers["alice"].tenant
    listed = (await http.get("/runs", params={"graph": "pipeline", "limit": 500})).json()
    mine = {r["workflow_id"]: r for r in listed["runs"]}
    assert workflow_id in mine
    assert mine[workflow_id]["input"] == {"text": "scheduled digest"}
    assert mine[workflow_id]["user_id"] == "alice"
    run = {"workflow_id": workflow_id, "run_id": done["run_id"]}
    assert T.COMPLETE in [m["t"] for m in await updates(http, run)]


async def test_pause_unpause_update_and_delete(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    schedule_id = f"life-{unique}"
    await create(http, nightly(schedule_id))
    paused = await http.post(f"/schedules/{schedule_id}/pause", json={"note": "holiday"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True
    assert paused.json()["note"] == "holiday"
    assert paused.json()["next_runs"] == [], "a paused schedule starts nothing"
    got = (await http.get(f"/schedules/{schedule_id}")).json()
    assert got["paused"] is True and got["next_runs"] == []
    unpaused = await http.post(f"/schedules/{schedule_id}/unpause")
    assert unpaused.json()["paused"] is False
    assert unpaused.json()["next_runs"], "an active schedule lists its next start times"

    changed = nightly(schedule_id, cron=None, interval_seconds=3600, overlap="buffer_one")
    del changed["id"]
    updated = await http.put(f"/schedules/{schedule_id}", json=changed)
    assert updated.status_code == 200, updated.text
    body = updated.json()
    assert (body["cron"], body["interval_seconds"], body["overlap"]) == (None, 3600, "buffer_one")
    assert (await http.get(f"/schedules/{schedule_id}")).json()["interval_seconds"] == 3600

    async def listed() -> bool:
        names = {s["id"] for s in (await http.get("/schedules")).json()["schedules"]}
        return schedule_id in names

    await eventually(listed, what="the schedule in the list", timeout=15, interval=0.2)

    assert (await http.delete(f"/schedules/{schedule_id}")).status_code == 204
    gone = await http.get(f"/schedules/{schedule_id}")
    assert gone.status_code == 404
    assert gone.headers["content-type"].startswith(PROBLEM)
    assert (await http.delete(f"/schedules/{schedule_id}")).status_code == 404


async def test_a_backfill_starts_the_runs_of_the_span(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    schedule_id = f"hourly-{unique}"
    body = nightly(schedule_id, cron=None, interval_seconds=3600, paused=True)
    await create(http, body)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    span = {
        "start": (hour + timedelta(minutes=30)).isoformat(),
        "end": (hour + timedelta(hours=3, minutes=30)).isoformat(),
    }
    reply = await http.post(f"/schedules/{schedule_id}/backfill", json=span)
    assert reply.status_code == 202, reply.text
    runs = await recent_runs(http, schedule_id, 3)
    assert len(set(runs)) == 3
    for workflow_id in runs:
        await wait_for_status(http, workflow_id, {"completed"})


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"graph": ""}, "graph"),
        ({"cron": "every day"}, "cron"),
        ({"cron": "* * *"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": None, "interval_seconds": 59}, "interval_seconds"),
        ({"time_zone": "Mars/Olympus"}, "time_zone"),
        ({"overlap": "sometimes"}, "overlap"),
        ({"note": "x" * 501}, "note"),
        ({"id": "bad id!"}, "id"),
        ({"cron": None, "interval_seconds": 0}, "interval_seconds"),
        ({"paused": "maybe"}, "paused"),
        ({"input": {"text": ""}}, "text"),
        ({"cron": None}, "interval_seconds"),
        # No cron starts runs faster than an interval may (once a minute).
        ({"cron": "@every 1s"}, "cron"),
        ({"cron": "* * * * * * *"}, "cron"),
    ],
)
async def test_bad_input_is_a_422_naming_the_field(
    http: httpx.AsyncClient, examples: list[str], unique: str, changes: dict[str, Any], field: str
) -> None:
    reply = await http.post("/schedules", json=nightly(f"bad-{unique}", **changes))
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM)
    assert field in reply.text
    assert (await http.get(f"/schedules/bad-{unique}")).status_code == 404


async def test_an_unregistered_graph_and_bad_backfill_are_refused(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    missing = await http.post("/schedules", json=nightly(f"nog-{unique}", graph=f"no-{unique}"))
    assert missing.status_code == 404
    assert f"no-{unique}" in missing.json()["detail"]
    await create(http, nightly(f"bf-{unique}"))
    now = datetime.now(UTC)
    backwards = {"start": now.isoformat(), "end": (now - timedelta(hours=1)).isoformat()}
    reply = await http.post(f"/schedules/bf-{unique}/backfill", json=backwards)
    assert reply.status_code == 422 and "end" in reply.text
    naive = {"start": "2026-01-01T00:00:00", "end": "2026-01-02T00:00:00"}
    reply = await http.post(f"/schedules/bf-{unique}/backfill", json=naive)
    assert reply.status_code == 422 and "start" in reply.text
    too_long = {"start": (now - timedelta(days=400)).isoformat(), "end": now.isoformat()}
    reply = await http.post(f"/schedules/bf-{unique}/backfill", json=too_long)
    assert reply.status_code == 422 and "end" in reply.json()["errors"][0]["field"]
    update = nightly(f"bf-{unique}", input={"text": ""})
    del update["id"]
    assert (await http.put(f"/schedules/bf-{unique}", json=update)).status_code == 422
    duplicate = await http.post("/schedules", json=nightly(f"bf-{unique}"))
    assert duplicate.status_code == 409


async def test_another_tenants_schedule_answers_as_an_unknown_one(
    http: httpx.AsyncClient,
    examples: list[str],
    stack: SpindleStack,
    callers: dict[str, Caller],
    unique: str,
) -> None:
    schedule_id = f"iso-{unique}"
    await create(http, nightly(schedule_id))
    async with client_for(stack, callers["mallory"]) as mallory:
        for method, suffix, body in [
            ("GET", "", None),
            ("PUT", "", {k: v for k, v in nightly(schedule_id).items() if k != "id"}),
            ("POST", "/pause", None),
            ("POST", "/unpause", None),
            ("POST", "/trigger", None),
            ("POST", "/backfill", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-02T00:00:00Z"}),
            ("DELETE", "", None),
        ]:
            theirs = await mallory.request(method, f"/schedules/{schedule_id}{suffix}", json=body)
            unknown = await mallory.request(method, f"/schedules/none-{unique}{suffix}", json=body)
            assert theirs.status_code == unknown.status_code == 404, (method, suffix, theirs.text)
            assert theirs.json()["detail"].replace(schedule_id, "ID") == unknown.json()[
                "detail"
            ].replace(f"none-{unique}", "ID")
        listed = (await mallory.get("/schedules")).json()["schedules"]
        assert schedule_id not in {s["id"] for s in listed}
    still = await http.get(f"/schedules/{schedule_id}")
    assert still.status_code == 200 and still.json()["paused"] is False


def user_env(stack: SpindleStack, caller: Caller) -> dict[str, str]:
    """A user's environment: the gateway's address and a key, no server settings."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not any(server in name for server in ("MONGO", "TEMPORAL", "REDIS"))
    }
    # This checkout's code, whichever checkout the installed command points at.
    return {
        **kept,
        "SPINDLE_URL": stack.base_url,
        "SPINDLE_API_KEY": caller.key,
        "PYTHONPATH": str(REPO_ROOT),
    }


async def test_the_cli_manages_schedules_through_the_gateway(
    stack: SpindleStack,
    callers: dict[str, Caller],
    http: httpx.AsyncClient,
    examples: list[str],
    unique: str,
    tmp_path: Path,
) -> None:
    env = user_env(stack, callers["alice"])
    schedule_id = f"cli-{unique}"

    def spindle(*args: str) -> subprocess.CompletedProcess[str]:
        return run_spindle("schedules", *args, environ=env, cwd=tmp_path)

    made = spindle(
        "create", schedule_id, "--graph", "pipeline", "--cron", "30 6 * * 1",
        "--input", '{"text": "from the command line"}', "--note", "weekly",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "cron 30 6 * * 1" in made.stdout
    shown = spindle("get", schedule_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert orjson.loads(shown.stdout)["input"] == {"text": "from the command line"}
    assert spindle("pause", schedule_id, "--note", "later").stdout.strip().endswith("paused")
    assert (await http.get(f"/schedules/{schedule_id}")).json()["paused"] is True
    assert spindle("unpause", schedule_id).stdout.strip().endswith("active")
    triggered = spindle("trigger", schedule_id)
    assert triggered.returncode == 0, triggered.stderr
    [workflow_id] = await recent_runs(http, schedule_id, 1)
    await wait_for_status(http, workflow_id, {"completed"})

    async def listed() -> bool:
        return schedule_id in spindle("list").stdout

    await eventually(listed, what="the schedule in `schedules list`", timeout=15, interval=0.2)
    assert spindle("delete", schedule_id).returncode == 0
    missing = spindle("get", schedule_id)
    assert missing.returncode == 1
    assert f"schedule '{schedule_id}' not found" in missing.stderr
    bad = spindle("create", f"bad-{unique}", "--graph", "pipeline", "--cron", "1 2 3")
    assert bad.returncode == 1 and "cron" in bad.stderr


async def test_a_backfill_past_its_run_cap_is_refused_naming_it(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    # Issue 28 (high): one backfill could start span / interval runs (44,640 at 31 days).
    schedule_id = f"cap-{unique}"
    await create(http, nightly(schedule_id, cron=None, interval_seconds=60, paused=True))
    end = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(days=1)
    span = {"start": (end - timedelta(hours=3)).isoformat(), "end": end.isoformat()}
    reply = await http.post(f"/schedules/{schedule_id}/backfill", json=span)
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert "schedule_backfill_max_runs" in problem["detail"]
    assert (problem["errors"][0]["field"], problem["errors"][0]["rule"]) == ("end", "max_runs")
    assert (await http.get(f"/schedules/{schedule_id}")).json()["runs_started"] == 0
