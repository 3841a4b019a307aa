"""Forking a run: ``POST /runs/{id}/fork`` reuses recorded outputs up to a node.

The fork is a new run of the same graph; the nodes before ``from_node`` complete
from the source run's recorded outputs (no activity in the fork's Temporal
history), ``from_node`` runs, and the fork ends with the same output.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.e2e.run_driver import start, wait_for_status
from tests.temporal_history import executed_activities

pytestmark = pytest.mark.e2e


async def scheduled_activities(stack: SpindleStack, workflow_id: str) -> list[str]:
    """The ids of the activities a run's Temporal history executed (on a task queue
    or, as router and output nodes run, locally), in order."""
    history = await stack.temporal.get_workflow_handle(workflow_id).fetch_history()
    return [executed.activity_id for executed in executed_activities(history)]


async def completed_pipeline(http: httpx.AsyncClient, text: str) -> dict[str, Any]:
    run = await start(http, graph="pipeline", input={"text": text})
    return await wait_for_status(http, run["workflow_id"], {"completed"})


async def test_fork_reuses_outputs_before_from_node(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    assert "summary" in {r["node_id"] for r in source["node_reports"]}, source

    reply = await http.post(f"/runs/{source['workflow_id']}/fork", json={"from_node": "summary"})
    assert reply.status_code == 201, reply.text
    fork_id = reply.json()["workflow_id"]
    assert fork_id != source["workflow_id"]
    forked = await wait_for_status(http, fork_id, {"completed"})

    assert forked["output"] == source["output"]
    assert forked["input"] == source["input"]
    activities = await scheduled_activities(stack, fork_id)
    assert "summary.1" in activities, activities
    assert not {"keywords.1", "mood.1"} & set(activities), activities
    # The source itself did run them: the assertion above is about the fork.
    assert {"keywords.1", "mood.1"} <= set(await scheduled_activities(stack, source["workflow_id"]))


async def test_fork_state_edit_changes_the_downstream_output(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    edited = ["edited", unique]
    reply = await http.post(
        f"/runs/{source['workflow_id']}/fork",
        json={"from_node": "summary", "state": {"keywords": edited}},
    )
    assert reply.status_code == 201, reply.text
    forked = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})
    assert forked["output"]["keywords"] == edited
    assert forked["output"]["mood"] == source["output"]["mood"]


async def test_fork_refusals(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    unique: str,
) -> None:
    source = await completed_pipeline(http, f"another ordinary note {unique}")
    url = f"/runs/{source['workflow_id']}/fork"

    unknown = await http.post(url, json={"from_node": "no-such-node"})
    assert unknown.status_code == 422, unknown.text
    assert "no-such-node" in unknown.json()["detail"]

    missing = await http.post(f"/runs/wf-missing-{unique}/fork", json={"from_node": "summary"})
    assert missing.status_code == 404, missing.text

    async with client_for(stack, callers["mallory"]) as other_tenant:
        foreign = await other_tenant.post(url, json={"from_node": "summary"})
    assert foreign.status_code == 404, foreign.text
