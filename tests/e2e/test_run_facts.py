"""A finished run keeps its facts (issue 28, item 3), over HTTP.

``GET /runs/{id}`` of a finished run shows ``history.generations`` and
``node_counts``, also once Temporal has forgotten the run (the archive keeps them);
every node the scheduler decided has a report: SKIPPED with the reason (pipeline's
``escalation`` on a positive message), REUSED with the source run (a fork), the
``workstream`` node with its child's state; an archived map's duration
is the one the run reported live.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from spindle.gateway.runs.temporal import TENANT_KEY
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.run_driver import start, wait_for_status
from tests.history_volume import loop_graph
from tests.polling import eventually

pytestmark = pytest.mark.e2e


def reports_of(run: dict[str, Any], node_id: str) -> list[dict[str, Any]]:
    return [r for r in run["node_reports"] if r["node_id"] == node_id]


async def test_a_skipped_branch_has_a_report_with_its_reason_after_the_end(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    run = await start(http, graph="pipeline", input={"text": f"a calm and pleasant day {unique}"})
    done = await wait_for_status(http, run["workflow_id"], {"completed"})

    [skipped] = reports_of(done, "escalation")
    assert skipped["status"] == "SKIPPED", skipped
    assert "mood → escalation" in skipped["output_summary"], skipped
    assert "when mood.label == 'negative'" in skipped["output_summary"], skipped
    assert done["node_counts"] == {"SUCCESS": 3, "SKIPPED": 1}
    assert done["history"]["generations"] == 1
    assert {r["node_id"] for r in done["node_reports"]} == {
        "keywords",
        "mood",
        "escalation",
        "summary",
    }


async def test_a_fork_s_reused_nodes_are_reported_reused_with_the_source_run(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    run = await start(http, graph="pipeline", input={"text": f"a calm and pleasant day {unique}"})
    source = await wait_for_status(http, run["workflow_id"], {"completed"})
    reply = await http.post(f"/runs/{source['workflow_id']}/fork", json={"from_node": "summary"})
    assert reply.status_code == 201, reply.text
    forked = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})

    for node_id in ("keywords", "mood"):
        [reused] = reports_of(forked, node_id)
        assert reused["status"] == "REUSED", reused
        assert reused["source_run"] == source["workflow_id"], reused
    assert reports_of(forked, "summary")[0]["status"] == "SUCCESS"
    assert forked["node_counts"] == {"REUSED": 2, "SUCCESS": 1, "SKIPPED": 1}


#: A ``workstream`` node that waits for its child (the ``delegation`` example did, before
#: its lead agent launched the research with its tool).
WORKSTREAM_NODE_GRAPH: dict[str, Any] = {
    "name": "delegation-node",
    "entry": "research",
    "nodes": [
        {
            "id": "research",
            "type": "workstream",
            "params": {
                "task": "Find what our notes say about {{ input.topic }}",
                "deadline_seconds": 120,
                "wait": True,
                "agent": {"tools": ["search_notes"], "max_turns": 4},
            },
        },
        {
            "id": "report",
            "type": "output",
            "params": {"select": "{state: research.state, summary: research.summary}"},
        },
    ],
    "edges": [{"from": "research", "to": "report"}],
}


async def test_a_workstream_node_reports_its_child_s_state_after_the_end(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = WORKSTREAM_NODE_GRAPH["name"]
    reply = await http.put(f"/graphs/{name}", json=WORKSTREAM_NODE_GRAPH)
    assert reply.status_code in (200, 201), reply.text
    run = await start(http, graph=name, input={"topic": f"durable agents {unique}"})
    done = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=90)

    [research] = reports_of(done, "research")
    assert research["status"] == "SUCCESS", research
    assert research["node_type"] == "workstream"
    assert research["child_state"] == done["output"]["state"] == "completed", (research, done)
    assert done["node_counts"] == {"SUCCESS": 2}


def map_graph(name: str) -> dict[str, Any]:
    """A map of 600 items in 3 batches: its time is far more than its collection's."""
    return {
        "name": name,
        "entry": "sums",
        "nodes": [
            {
                "id": "sums",
                "type": "map",
                "params": {
                    "over": "input.rows",
                    "concurrency": 8,
                    "node": {
                        "type": "tool",
                        "params": {"tool": "calculator"},
                        "inputs": {"args": "{expression: item}"},
                    },
                },
            }
        ],
        "edges": [],
    }


async def test_an_archived_map_duration_is_the_live_one(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    rows = [f"{i} + 1" for i in range(600)]
    run = await start(http, graph_spec=map_graph(f"facts-map-{unique}"), input={"rows": rows})
    done = await wait_for_status(http, run["workflow_id"], {"completed"}, timeout=90)
    handle = stack.temporal.get_workflow_handle(run["workflow_id"], result_type=GraphRunResult)
    [live] = [r for r in (await handle.result()).node_reports if r.node_id == "sums"]

    [archived] = reports_of(done, "sums")
    reply = await http.get(f"/runs/{run['workflow_id']}/bundle")
    assert reply.status_code == 200, reply.text
    [bundled] = [r for r in reply.json()["node_reports"] if r["node_id"] == "sums"]
    assert abs(archived["duration_ms"] - live.duration_ms) < 5, (archived, live)
    assert abs(bundled["duration_ms"] - live.duration_ms) < 5, (bundled, live)
    assert done["node_counts"] == {"SUCCESS": 1}


async def test_generations_and_node_counts_outlive_temporal(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    workflow_id = f"facts-gens-{uuid.uuid4().hex[:10]}"
    tenant = callers["alice"].tenant
    handle = await stack.temporal.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=loop_graph(20),
            input={"text": "one two three"},
            tenant_id=tenant,
            continue_as_new_after_events=100,
        ),
        id=workflow_id,
        task_queue=stack.settings.task_queue,
        result_type=GraphRunResult,
        search_attributes=TypedSearchAttributes([SearchAttributePair(TENANT_KEY, tenant)]),
    )
    result = await handle.result()
    assert result.generation > 1

    ended = await wait_for_status(http, workflow_id, {"completed"})
    assert ended["history"]["generations"] == result.generation
    assert ended["node_counts"] == {"SUCCESS": 42} == result.report_counts

    # Past Temporal's retention: only the archive knows the run.
    await stack.temporal.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=stack.temporal.namespace,
            workflow_execution=WorkflowExecution(workflow_id=workflow_id),
        )
    )

    async def archived_only() -> dict[str, Any] | None:
        reply = await http.get(f"/runs/{workflow_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body if body["temporal_status"] is None else None

    # The dev server deletes in the background; under load that took over 30 s here.
    archived: dict[str, Any] = await eventually(
        archived_only, what="Temporal forgets the run", timeout=120
    )
    assert archived["status"] == "completed"
    assert archived["history"]["generations"] == result.generation
    assert archived["history"]["events"] is None
    assert archived["node_counts"] == {"SUCCESS": 42}


async def test_a_node_failed_in_the_workflow_keeps_its_report_after_the_end(
    http: httpx.AsyncClient, unique: str
) -> None:
    # max_turns is enforced in the workflow (no activity fails): the run's end archives
    # the FAILED report, so the run page does not show the node "pending".
    spec = {
        "name": f"facts-max-turns-{unique}",
        "entry": "researcher",
        "nodes": [
            {
                "id": "researcher",
                "type": "agent",
                "params": {"tools": ["search_notes", "calculator"], "max_turns": 1},
            }
        ],
        "edges": [],
    }
    run = await start(http, graph_spec=spec, input={"question": f"what is 2 + 3? {unique}"})
    workflow_id = run["workflow_id"]

    async def closed() -> dict[str, Any] | None:
        # Once Temporal has closed the run, its reports come from the archive alone.
        reply = await http.get(f"/runs/{workflow_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body if body["temporal_status"] == "FAILED" else None

    archived: dict[str, Any] = await eventually(closed, what="the run failed", timeout=60)
    [kept] = reports_of(archived, "researcher")
    assert kept["status"] == "FAILED" and "max_turns" in kept["error"], kept
    assert archived["node_counts"] == {"FAILED": 1}
