"""Forks with a record (docs/replay-and-compare.md): a whole replay by default, node
overrides, a candidate graph, lineage on the run and in the run list, and refusals."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import httpx
import pytest

from spindle.client import AsyncSpindleClient, ClientConfig, SpindleClient, ValidationError
from spindle.shared.contracts.compare import RunComparison
from spindle.shared.contracts.forks import ForkRequest, NodeOverride
from tests.e2e.conftest import Caller, SpindleStack, example_graph
from tests.e2e.run_driver import start, wait_for_status
from tests.e2e.test_fork import completed_pipeline, scheduled_activities

pytestmark = pytest.mark.e2e

QUESTION = "What is 12 * 7 according to the notes?"


async def completed_research(http: httpx.AsyncClient, unique: str) -> dict[str, Any]:
    run = await start(http, graph="research-agent", input={"question": f"{QUESTION} {unique}"})
    return await wait_for_status(http, run["workflow_id"], {"completed"})


def swapped_pipeline() -> dict[str, Any]:
    """The pipeline with its edge conditions swapped: positive text escalates."""
    spec = copy.deepcopy(example_graph("pipeline"))
    spec["name"] = "pipeline-swapped"
    for edge in spec["edges"]:
        if edge["to"] == "escalation":
            edge["when"] = "mood.label != 'negative'"
        elif edge["to"] == "summary":
            edge["when"] = "mood.label == 'negative'"
    return spec


async def test_a_fork_without_a_body_replays_the_whole_run(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    reply = await http.post(f"/runs/{source['workflow_id']}/fork")
    assert reply.status_code == 201, reply.text
    forked = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})

    assert forked["output"] == source["output"]
    assert {"keywords.1", "mood.1"} <= set(await scheduled_activities(stack, forked["workflow_id"]))
    assert "REUSED" not in (forked["node_counts"] or {})
    lineage = forked["forked_from"]
    assert lineage["workflow_id"] == source["workflow_id"]
    assert lineage["from_node"] == "keywords"  # the entry
    assert lineage["reused"] == [] and lineage["graph_changed"] is False
    assert (lineage["tools"], lineage["llm"], lineage["on_miss"]) == ("live", "live", "fail")


async def test_an_override_changes_the_agent_and_the_lineage_says_so(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_research(http, unique)
    overrides = {
        "researcher": {
            "params": {"instructions": "Answer with the calculator only.", "tools": ["calculator"]}
        }
    }
    reply = await http.post(f"/runs/{source['workflow_id']}/fork", json={"overrides": overrides})
    assert reply.status_code == 201, reply.text
    forked = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})

    assert forked["output"] != source["output"]
    lineage = forked["forked_from"]
    assert lineage["overrides"] == overrides and lineage["graph_changed"] is True
    assert lineage["graph"] == "research-agent"


async def test_a_candidate_graph_reuses_unchanged_nodes_and_changes_the_output(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    assert source["output"]["priority"] == "normal"
    reply = await http.post(
        f"/runs/{source['workflow_id']}/fork",
        json={"graph_spec": swapped_pipeline(), "from_node": "mood"},
    )
    assert reply.status_code == 201, reply.text
    forked = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})

    assert forked["output"]["priority"] == "high"
    assert forked["graph_name"] == "pipeline-swapped"
    # Edges changed, nodes did not: keywords (upstream of mood) is reused.
    assert forked["forked_from"]["reused"] == ["keywords"]
    activities = await scheduled_activities(stack, forked["workflow_id"])
    assert "mood.1" in activities and "keywords.1" not in activities


async def test_forks_are_listed_by_their_source(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    other = await completed_pipeline(http, f"another calm day {unique}")
    forks = []
    for body in ({}, {"from_node": "summary"}):
        reply = await http.post(f"/runs/{source['workflow_id']}/fork", json=body)
        assert reply.status_code == 201, reply.text
        forks.append(reply.json()["workflow_id"])
    unrelated = await http.post(f"/runs/{other['workflow_id']}/fork", json={})
    assert unrelated.status_code == 201, unrelated.text

    listed = await http.get("/runs", params={"forked_from": source["workflow_id"]})
    assert listed.status_code == 200, listed.text
    page = listed.json()
    assert sorted(run["workflow_id"] for run in page["runs"]) == sorted(forks)
    assert page["total"] == 2
    assert all(run["forked_from"]["workflow_id"] == source["workflow_id"] for run in page["runs"])
    for fork_id in forks:
        await wait_for_status(http, fork_id, {"completed"})
    await wait_for_status(http, unrelated.json()["workflow_id"], {"completed"})


async def test_fork_refuses_unknown_override_nodes_and_bad_candidates(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a plain note {unique}")
    url = f"/runs/{source['workflow_id']}/fork"

    unknown = await http.post(url, json={"overrides": {"ghost": {"params": {"x": 1}}}})
    assert unknown.status_code == 422, unknown.text
    assert "ghost" in unknown.json()["detail"]

    broken = swapped_pipeline()
    broken["edges"].append({"from": "mood", "to": "nowhere"})
    bad = await http.post(url, json={"graph_spec": broken})
    assert bad.status_code == 422, bad.text
    assert "nowhere" in bad.text

    bad_params = await http.post(
        url, json={"overrides": {"keywords": {"params": {"tool": "no_such_tool"}}}}
    )
    assert bad_params.status_code == 422, bad_params.text
    assert "no_such_tool" in bad_params.text

    both = await http.post(url, json={"graph": "pipeline", "graph_spec": broken})
    assert both.status_code == 422, both.text

    version = await http.post(url, json={"graph": "pipeline", "version": "99"})
    assert version.status_code == 409, version.text
    assert "99" in version.json()["detail"]


def sdk_fork_and_compare(config: ClientConfig, source: str) -> tuple[str, RunComparison, list[str]]:
    """Fork, wait, compare and list the forks through the synchronous SDK."""
    with SpindleClient(config) as client:
        started = client.fork_run(source, from_node="summary", state={"keywords": ["sdk"]})
        for _ in client.stream(started):
            pass
        assert client.get_run(started).forked_from is not None
        compared = client.compare_runs(source, started)
        forks = client.list_runs(forked_from=source).runs
        return started.workflow_id, compared, [run.workflow_id for run in forks]


async def test_the_sdk_forks_compares_and_lists_forks(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    unique: str,
) -> None:
    source = await completed_pipeline(http, f"a calm and pleasant day {unique}")
    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    fork_id, compared, listed = await asyncio.to_thread(
        sdk_fork_and_compare, config, source["workflow_id"]
    )
    assert listed == [fork_id]
    # The state edit replaced keywords' reused output; summary ran on it.
    assert compared.changed_nodes == ["keywords", "summary"]
    assert compared.output.diff[0].path == "$.keywords[0]"
    async with AsyncSpindleClient(config) as client:
        request = ForkRequest(overrides={"ghost": NodeOverride(params={})})
        with pytest.raises(ValidationError, match="ghost"):
            await client.fork_run(source["workflow_id"], request)
