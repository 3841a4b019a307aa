"""``GET /runs/{a}/compare/{b}`` (docs/replay-and-compare.md): which nodes differ, nodes
only in one side, the output diff and totals; unrelated runs and other tenants' refused."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack, client_for, example_graph
from tests.e2e.run_driver import start, wait_for_status
from tests.e2e.test_fork import completed_pipeline
from tests.e2e.test_fork_candidates import completed_research, swapped_pipeline

pytestmark = pytest.mark.e2e


async def fork(http: httpx.AsyncClient, workflow_id: str, body: dict[str, object]) -> str:
    reply = await http.post(f"/runs/{workflow_id}/fork", json=body)
    assert reply.status_code == 201, reply.text
    fork_id = str(reply.json()["workflow_id"])
    await wait_for_status(http, fork_id, {"completed"})
    return fork_id


async def test_compare_names_the_agent_node_an_override_changed(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_research(http, unique)
    overrides = {"researcher": {"params": {"tools": ["calculator"]}}}
    forked = await fork(http, source["workflow_id"], {"overrides": overrides})

    reply = await http.get(f"/runs/{source['workflow_id']}/compare/{forked}")
    assert reply.status_code == 200, reply.text
    compared = reply.json()
    assert compared["relation"] == f"{forked} is a fork of {source['workflow_id']}"
    by_node = {node["node_id"]: node for node in compared["nodes"]}
    assert set(by_node) == {"researcher", "answer"}
    assert "researcher" in compared["changed_nodes"]
    researcher = by_node["researcher"]
    assert researcher["same_output"] is False
    assert researcher["a"]["tokens"] > 0 and researcher["b"]["tokens"] > 0
    assert researcher["a"]["tool_calls"] == 2 and researcher["b"]["tool_calls"] == 1
    assert compared["only_a"] == [] and compared["only_b"] == []
    assert compared["output"]["same"] is False and compared["output"]["diff"]
    totals = compared["totals"]
    assert totals["a"]["tool_calls"] == 2 and totals["b"]["tool_calls"] == 1
    assert totals["delta"]["tool_calls"] == -1
    assert totals["a"]["duration_ms"] > 0


async def test_a_changed_edge_condition_shows_where_the_runs_part(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    forked = await fork(http, source["workflow_id"], {"graph_spec": swapped_pipeline()})

    compared = (await http.get(f"/runs/{source['workflow_id']}/compare/{forked}")).json()
    assert [node["node_id"] for node in compared["nodes"]] == ["keywords", "mood"]
    assert all(node["same_output"] for node in compared["nodes"])
    assert [node["node_id"] for node in compared["only_a"]] == ["summary"]
    assert [node["node_id"] for node in compared["only_b"]] == ["escalation"]
    output = compared["output"]
    assert output["same"] is False
    assert {"path": "$.priority", "op": "changed", "a": "normal", "b": "high"} in output["diff"]
    assert compared["totals"]["a"]["tool_calls"] == 2  # the two tool nodes


async def test_a_pure_replay_compares_the_same(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    forked = await fork(http, source["workflow_id"], {"from_node": "summary"})
    compared = (await http.get(f"/runs/{forked}/compare/{source['workflow_id']}")).json()
    assert compared["output"] == {
        "a": source["output"],
        "b": source["output"],
        "same": True,
        "diff": [],
        "diff_truncated": False,
    }
    statuses = {node["node_id"]: node["a"]["status"] for node in compared["nodes"]}
    assert statuses == {"keywords": "REUSED", "mood": "REUSED", "summary": "SUCCESS"}
    assert compared["changed_nodes"] == []


async def test_compare_refuses_unrelated_runs_and_other_tenants(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    unique: str,
) -> None:
    pipeline = await completed_pipeline(http, f"a plain note {unique}")
    research = await completed_research(http, unique)
    unrelated = await http.get(f"/runs/{pipeline['workflow_id']}/compare/{research['workflow_id']}")
    assert unrelated.status_code == 409, unrelated.text
    assert "research-agent" in unrelated.json()["detail"]

    async with client_for(stack, callers["mallory"]) as other_tenant:
        started = await start(
            other_tenant, graph_spec=example_graph("pipeline"), input={"text": f"mine {unique}"}
        )
        theirs = await wait_for_status(other_tenant, started["workflow_id"], {"completed"})
        foreign = await other_tenant.get(
            f"/runs/{theirs['workflow_id']}/compare/{pipeline['workflow_id']}"
        )
    assert foreign.status_code == 404, foreign.text
    missing = await http.get(f"/runs/{pipeline['workflow_id']}/compare/run-missing-{unique}")
    assert missing.status_code == 404, missing.text
