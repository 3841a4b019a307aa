"""Every client mistake gets the right 4xx with a problem body that says what is
wrong, and nothing is started or half-written."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SpindleStack, example_graph

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = reply.json()
    assert body["status"] == status
    assert body["title"] and body["detail"]
    return body


def graph(name: str, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "entry": nodes[0]["id"], "nodes": nodes, "edges": edges}


def tool(node_id: str) -> dict[str, Any]:
    return {"id": node_id, "type": "tool", "params": {"tool": "word_count", "args": {"text": "x"}}}


async def assert_nothing_started(http: httpx.AsyncClient, stack: SpindleStack, name: str) -> None:
    """No run of graph ``name`` in the archive, none in Temporal's visibility."""
    listed = await http.get("/runs", params={"graph": name})
    assert listed.status_code == 200
    assert listed.json()["total"] == 0
    count = await stack.temporal.count_workflows(f"SpindleGraph = '{name}'")
    assert count.count == 0


async def test_dangling_edge_is_refused_naming_the_node(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"dangling-{unique}"
    spec = graph(name, [tool("a")], [{"from": "a", "to": "ghost"}])
    body = problem(await http.post("/runs", json={"graph_spec": spec}), 422)
    assert {"node": "ghost", "rule": "dangling_edge"}.items() <= body["errors"][0].items()
    assert "ghost" in body["detail"]
    await assert_nothing_started(http, stack, name)


async def test_unreachable_node_is_refused(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"unreachable-{unique}"
    spec = graph(name, [tool("a"), tool("island")], [])
    body = problem(await http.post("/runs", json={"graph_spec": spec}), 422)
    assert [(e["node"], e["rule"]) for e in body["errors"]] == [("island", "unreachable_node")]
    await assert_nothing_started(http, stack, name)


async def test_unknown_node_type_is_refused(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"unknown-type-{unique}"
    spec = graph(name, [tool("a"), {"id": "b", "type": "teleport"}], [{"from": "a", "to": "b"}])
    body = problem(await http.post("/runs", json={"graph_spec": spec}), 422)
    assert body["title"] == "Executor not found"
    assert any(e["node"] == "b" and "teleport" in e["message"] for e in body["errors"])
    await assert_nothing_started(http, stack, name)


async def test_bad_node_params_name_node_and_field(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"bad-params-{unique}"
    spec = graph(name, [{"id": "ask", "type": "agent", "params": {"max_turns": 0}}], [])
    body = problem(await http.post("/runs", json={"graph_spec": spec}), 422)
    assert any(e["node"] == "ask" and "max_turns" in (e["field"] or "") for e in body["errors"])
    await assert_nothing_started(http, stack, name)


async def test_invalid_graph_is_not_registered(http: httpx.AsyncClient, unique: str) -> None:
    name = f"broken-{unique}"
    spec = graph(name, [tool("a")], [{"from": "a", "to": "nowhere"}])
    problem(await http.put(f"/graphs/{name}", json=spec), 422)
    problem(await http.get(f"/graphs/{name}"), 404)
    mismatch = graph("other-name", [tool("a")], [])
    body = problem(await http.put(f"/graphs/{name}", json=mismatch), 422)
    assert body["errors"][0]["field"] == "name"


async def test_input_is_checked_against_the_graph_input_schema(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"approval-{unique}"
    spec = {**example_graph("approval-flow"), "name": name}
    body = problem(await http.post("/runs", json={"graph_spec": spec, "input": {}}), 422)
    assert any("topic" in (e.get("field") or "") for e in body["errors"]), body
    assert "topic" in body["detail"]
    await assert_nothing_started(http, stack, name)


async def test_unknown_graph_name_is_404(http: httpx.AsyncClient, examples: list[str]) -> None:
    body = problem(await http.post("/runs", json={"graph": "no-such-graph"}), 404)
    assert "no-such-graph" in body["detail"]


async def test_start_body_needs_exactly_one_graph(http: httpx.AsyncClient) -> None:
    both = {"graph": "x", "graph_spec": graph("x", [tool("a")], [])}
    body = problem(await http.post("/runs", json=both), 422)
    assert "exactly one" in body["detail"]
    problem(await http.post("/runs", json={"input": {}}), 422)
    body = problem(await http.post("/runs", json={"graph": "x", "surprise": 1}), 422)
    assert body["errors"][0]["field"] == "surprise"


async def test_malformed_json_is_400(http: httpx.AsyncClient) -> None:
    reply = await http.post(
        "/runs", content=b'{"graph": "approval-flow",', headers={"Content-Type": "application/json"}
    )
    body = problem(reply, 400)
    assert "not valid JSON" in body["detail"]


async def test_oversized_body_is_413(http: httpx.AsyncClient, stack: SpindleStack) -> None:
    limit = stack.settings.max_body_bytes
    padding = "x" * (limit + 1)
    reply = await http.post("/runs", json={"graph": "approval-flow", "input": {"topic": padding}})
    body = problem(reply, 413)
    assert str(limit) in body["detail"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as read
        yield b'{"graph": "approval-flow", "input": {"topic": "'
        for _ in range(limit // 65536 + 2):
            yield b"x" * 65536
        yield b'"}}'

    reply = await http.post("/runs", content=chunks(), headers={"Content-Type": "application/json"})
    body = problem(reply, 413)
    assert str(limit) in body["detail"]


async def test_bad_query_parameters_name_the_parameter(http: httpx.AsyncClient) -> None:
    body = problem(await http.get("/runs", params={"limit": 0}), 422)
    assert body["errors"][0]["in"] == "query"
    assert body["errors"][0]["field"] == "limit"
    problem(await http.get("/runs", params={"status": "sleeping"}), 422)


@pytest.mark.parametrize("prefix", ["", "/api/v1/workflows"])
async def test_unknown_run_is_404_everywhere(http: httpx.AsyncClient, prefix: str) -> None:
    wf, run = "run-doesnotexist", "0000"
    base = f"{prefix}/runs/{wf}/{run}"
    problem(await http.get(f"{base}/updates"), 404)
    problem(await http.get(f"{base}/stream"), 404)
    problem(await http.post(f"{base}/signal/UserInput", json={"message": "hi"}), 404)
    problem(await http.post(f"{base}/cancel"), 404)
    problem(await http.get(base), 404)
    if not prefix:
        problem(await http.get(f"/runs/{wf}"), 404)
        problem(await http.post(f"/runs/{wf}/cancel"), 404)
        problem(await http.post(f"/runs/{wf}/signal/UserInput", json={"message": "hi"}), 404)


async def test_unknown_signal_lists_the_supported_ones(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    started = await http.post("/runs", json={"graph": "approval-flow", "input": {"topic": "t"}})
    run = started.json()
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/signal/Teleport"
    body = problem(await http.post(url, json={}), 404)
    assert "UserInput" in body["detail"]


async def test_unknown_route_is_a_problem_too(http: httpx.AsyncClient) -> None:
    problem(await http.get("/no/such/route"), 404)
