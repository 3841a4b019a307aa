"""``GET /runs/{id}/bundle``: one document with the run, messages, reports, history."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import start, updates, wait_for_status

pytestmark = pytest.mark.e2e


async def test_a_finished_runs_bundle_has_every_part(
    http: httpx.AsyncClient,
    examples: list[str],
    stack: SpindleStack,
    callers: dict[str, Caller],
) -> None:
    run = await start(http, graph="pipeline", input={"text": "Terrible outage, angry users"})
    workflow_id = run["workflow_id"]
    await wait_for_status(http, workflow_id, {"completed"})

    reply = await http.get(f"/runs/{workflow_id}/bundle")
    assert reply.status_code == 200, reply.text
    bundle = reply.json()
    assert set(bundle) == {
        "run",
        "messages",
        "node_reports",
        "history",
        "trace",
        "trace_ids",
        "answer_attempts",
    }
    assert bundle["answer_attempts"] == []  # pipeline asks nobody

    assert bundle["run"]["workflow_id"] == workflow_id
    assert bundle["run"]["status"] == "completed"
    assert bundle["run"]["output"]["priority"] == "high"
    assert bundle["messages"] == await updates(http, run)
    reported = {r["node_id"]: r for r in bundle["node_reports"]}
    assert reported["keywords"]["status"] == "SUCCESS"
    assert set(reported) == {r["node_id"] for r in bundle["run"]["node_reports"]}
    # The run's NodeMessages: each executed node's input and output envelope, in order.
    # A node the scheduler skipped has a report (SKIPPED, with the reason) but ran nothing.
    ran = [r for r in bundle["node_reports"] if r["status"] != "SKIPPED"]
    skipped = [r for r in bundle["node_reports"] if r["status"] == "SKIPPED"]
    assert [r["node_id"] for r in skipped] == ["summary"]  # a negative text: escalation ran
    assert all(r["input"] is None and r["output"] is None for r in skipped)
    envelopes = {r[side]["messageId"] for r in ran for side in ("input", "output")}
    assert [m["messageId"] for m in bundle["trace"]] and {
        m["messageId"] for m in bundle["trace"]
    } == envelopes
    assert bundle["trace"][0]["nodeId"] == bundle["node_reports"][0]["node_id"]
    # The e2e stack does not trace: no trace ids, and nothing breaks.
    assert bundle["trace_ids"] == {"run": None, "messages": []}
    [generation] = bundle["history"]  # one per generation; this run never continued as new
    assert generation["run_id"] == run["run_id"]
    events = generation["events"]
    assert events[0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    assert events[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"

    async with client_for(stack, callers["mallory"]) as other_tenant:
        hidden = await other_tenant.get(f"/runs/{workflow_id}/bundle")
    assert hidden.status_code == 404
    assert hidden.headers["content-type"].startswith("application/problem+json")


async def test_an_unknown_runs_bundle_is_404(http: httpx.AsyncClient, unique: str) -> None:
    reply = await http.get(f"/runs/no-such-run-{unique}/bundle")
    assert reply.status_code == 404
    assert reply.headers["content-type"].startswith("application/problem+json")
