"""Listing, describing, cancelling and idempotently starting runs; graphs; health."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import example_graph
from tests.e2e.run_driver import T, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse

pytestmark = pytest.mark.e2e


async def test_list_runs_filters_and_pages(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    name = f"pipeline-{unique}"
    spec = {**example_graph("pipeline"), "name": name}
    started = [
        await start(http, graph_spec=spec, input={"text": f"note {i}"}, context={"n": i})
        for i in range(3)
    ]
    for run in started:
        await wait_for_status(http, run["workflow_id"], {"completed"})

    reply = await http.get("/runs", params={"graph": name})
    assert reply.status_code == 200
    page = reply.json()
    assert page["total"] == 3 and page["limit"] == 50 and page["offset"] == 0
    assert {r["workflow_id"] for r in page["runs"]} == {r["workflow_id"] for r in started}
    assert [r["workflow_id"] for r in page["runs"]] == [r["workflow_id"] for r in started][::-1]
    assert all(r["status"] == "completed" and r["graph_name"] == name for r in page["runs"])

    second = (await http.get("/runs", params={"graph": name, "limit": 1, "offset": 1})).json()
    assert second["total"] == 3
    assert [r["workflow_id"] for r in second["runs"]] == [started[1]["workflow_id"]]

    completed = (await http.get("/runs", params={"graph": name, "status": "completed"})).json()
    assert completed["total"] == 3
    paused = (await http.get("/runs", params={"graph": name, "status": "paused"})).json()
    assert paused["total"] == 0


async def test_describe_a_finished_run(http: httpx.AsyncClient, examples: list[str]) -> None:
    run = await start(
        http, graph="pipeline", input={"text": "Terrible outage, angry users"}, meta={"source": "t"}
    )
    # The archive says "completed" as the run's last activity ends, a moment before
    # Temporal closes the workflow: wait for Temporal's word, then check both.
    done = await wait_for_status(http, run["workflow_id"], {"COMPLETED"}, field="temporal_status")
    assert done["status"] == "completed"
    assert done["run_id"] == run["run_id"]
    assert done["graph_name"] == "pipeline"
    assert done["input"] == {"text": "Terrible outage, angry users"}
    assert done["output"]["priority"] == "high"
    reports = {r["node_id"]: r for r in done["node_reports"]}
    assert reports["keywords"]["status"] == "SUCCESS"
    assert done["temporal_ui_url"] == run["temporal_ui_url"]
    assert done["updates_url"].endswith(f"/runs/{run['workflow_id']}/{run['run_id']}/updates")


async def test_cancel_ends_the_stream_with_terminated(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "to be cancelled"})
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)
        reply = await http.post(f"/runs/{run['workflow_id']}/cancel", json={"reason": "test"})
        assert reply.status_code == 202, reply.text
        assert reply.json()["status"] == "accepted"
        await sse.read_to_end(timeout=60)
        assert sse.ended
    last = sse.events[-1].json()
    assert last["t"] == T.TERMINATED
    assert last["d"]["status"] == "canceled"

    done = await wait_for_status(http, run["workflow_id"], {"CANCELED"}, field="temporal_status")
    assert done["status"] == "canceled"
    assert not done["pending_input"]
    again = await http.post(f"/runs/{run['workflow_id']}/cancel")
    assert again.status_code == 409, again.text
    assert (await updates(http, run))[-1]["t"] == T.TERMINATED


async def test_idempotency_key_returns_the_same_run(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    body = {"graph": "approval-flow", "input": {"topic": "idempotent"}}
    headers = {"Idempotency-Key": f"key-{unique}"}
    first = await http.post("/runs", json=body, headers=headers)
    second = await http.post("/runs", json=body, headers=headers)
    assert first.status_code == second.status_code == 201
    assert second.headers.get("idempotent-replayed") == "true"
    assert first.json()["workflow_id"] == second.json()["workflow_id"]
    assert first.json()["run_id"] == second.json()["run_id"]
    other = await http.post("/runs", json=body, headers={"Idempotency-Key": f"other-{unique}"})
    assert other.json()["workflow_id"] != first.json()["workflow_id"]
    for reply in (first, other):
        cancel = await http.post(f"/runs/{reply.json()['workflow_id']}/cancel")
        assert cancel.status_code == 202


async def test_graph_registry(http: httpx.AsyncClient, examples: list[str], unique: str) -> None:
    listed = (await http.get("/graphs")).json()["graphs"]
    by_name = {g["name"]: g for g in listed}
    assert {"approval-flow", "pipeline", "research-agent"} <= set(by_name)
    assert "prompt" in by_name["approval-flow"]["node_types"]

    spec = (await http.get("/graphs/approval-flow")).json()
    assert spec["entry"] == "draft"
    assert {"from": "draft", "to": "review"} in spec["edges"]

    schema = (await http.get("/graphs/schema")).json()
    assert {"entry", "nodes", "edges"} <= set(schema["properties"])

    name = f"mine-{unique}"
    mine = {**example_graph("pipeline"), "name": name}
    created = await http.put(f"/graphs/{name}", json=mine)
    assert created.status_code == 201
    mine["description"] = "changed"
    replaced = await http.put(f"/graphs/{name}", json=mine)
    assert replaced.status_code == 200
    assert (await http.get(f"/graphs/{name}")).json()["description"] == "changed"


async def test_health_and_readiness(http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    checks = ready.json()["checks"]
    assert {name: check["ok"] for name, check in checks.items()} == {
        "temporal": True,
        "redis": True,
        "mongo": True,
    }


async def test_openapi_documents_both_route_families(http: httpx.AsyncClient) -> None:
    paths = (await http.get("/openapi.json")).json()["paths"]
    for suffix in ("updates", "stream", "signal/{name}"):
        assert f"/runs/{{workflow_id}}/{{run_id}}/{suffix}" in paths
        assert f"/api/v1/workflows/runs/{{workflow_id}}/{{run_id}}/{suffix}" in paths
