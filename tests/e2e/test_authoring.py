"""Authoring over HTTP (issue 29, item 4): every fault of a graph in one 422, graphs
registered as YAML (a bad one answered with line and column), ``GET /tools``, an
agent's structured output, and an inline graph without a name."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.run_driver import start, wait_for_status

pytestmark = pytest.mark.e2e

YAML = {"Content-Type": "application/yaml"}


async def test_every_fault_comes_in_one_answer(http: httpx.AsyncClient, unique: str) -> None:
    graph = {
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "agent", "params": {"max_turns": 0}},
            {"id": "b", "type": "teleport"},
            {"id": "c", "type": "tool", "params": {"tool": "no_such_tool"}},
            {"id": "island", "type": "output"},
        ],
        "edges": [
            {"from": "a", "to": "b"},
            {"from": "b", "to": "ghost"},
            {"from": "b", "to": "c"},
        ],
    }
    reply = await http.put(f"/graphs/faults-{unique}", json=graph)
    assert reply.status_code == 422, reply.text
    found = {(e["node"], e["field"], e["rule"]) for e in reply.json()["errors"]}
    assert found == {
        ("ghost", "edges[1].to", "dangling_edge"),
        ("island", None, "unreachable_node"),
        ("b", "type", "unknown_node_type"),
        ("a", "params.max_turns", "greater_than_equal"),
        ("c", "params.tool", "unknown_tool"),
    }
    assert (await http.get(f"/graphs/faults-{unique}")).status_code == 404


async def test_a_graph_is_registered_as_yaml(http: httpx.AsyncClient, unique: str) -> None:
    name = f"yaml-{unique}"
    text = (
        "# a comment, as YAML allows\n"
        "entry: echo\n"
        "nodes:\n"
        "  - id: echo\n"
        "    type: output\n"
        "    params:\n"
        "      select: input\n"
    )
    for media in ("application/yaml", "text/yaml; charset=utf-8"):
        reply = await http.put(f"/graphs/{name}", content=text, headers={"Content-Type": media})
        assert reply.status_code in (200, 201), reply.text
        assert reply.json()["name"] == name and reply.json()["nodes"][0]["id"] == "echo"
    run = await start(http, graph=name, input={"hello": "yaml"})
    done = await wait_for_status(http, run["workflow_id"], ["completed"])
    assert done["output"] == {"hello": "yaml"}


async def test_bad_yaml_names_line_and_column(http: httpx.AsyncClient, unique: str) -> None:
    text = "entry: a\nnodes:\n  - id: a\n    type: [output\n"
    reply = await http.put(f"/graphs/bad-{unique}", content=text, headers=YAML)
    assert reply.status_code == 400, reply.text
    [error] = reply.json()["errors"]
    assert error["rule"] == "yaml_invalid" and error["line"] == 5, error
    assert "line 5" in reply.json()["detail"]
    wrong = await http.put(
        f"/graphs/bad-{unique}", content="x", headers={"Content-Type": "text/csv"}
    )
    assert wrong.status_code == 415, wrong.text
    listed = await http.put(f"/graphs/bad-{unique}", content="- a\n- b\n", headers=YAML)
    assert listed.status_code == 422 and "not list" in listed.json()["detail"]


async def test_tools_are_listed_with_their_schemas(http: httpx.AsyncClient) -> None:
    reply = await http.get("/tools")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["tools_known"] is True
    tools = {t["name"]: t for t in body["tools"]}
    calculator = tools["calculator"]
    assert calculator["source"] == "builtin" and "arithmetic" in calculator["description"]
    assert calculator["params_schema"]["required"] == ["expression"]
    assert {"search_notes", "word_count", "draft_document"} <= set(tools)


async def test_an_agent_gives_structured_output(http: httpx.AsyncClient) -> None:
    # The offline model answers in prose: it cannot fit the schema, so the node
    # fails after one retry, naming the violation.
    schema: dict[str, Any] = {"type": "object", "required": ["verdict"]}
    graph = {
        "entry": "judge",
        "nodes": [{"id": "judge", "type": "agent", "params": {"output_schema": schema}}],
    }
    run = await start(http, graph_spec=graph, input="is this JSON?")
    failed = await wait_for_status(http, run["workflow_id"], ["failed"])
    text = json.dumps(failed)
    assert "does not fit params.output_schema" in text, text
    assert "the answer is not JSON" in text, text

    bad_node = {"id": "judge", "type": "agent", "params": {"output_schema": {"type": 5}}}
    bad = {"entry": "judge", "nodes": [bad_node]}
    refused = await http.post("/runs", json={"graph_spec": bad})
    assert refused.status_code == 422, refused.text
    assert {(e["field"], e["rule"]) for e in refused.json()["errors"]} == {
        ("params.output_schema", "bad_schema")
    }


async def test_an_inline_graph_without_a_name_gets_one(http: httpx.AsyncClient) -> None:
    graph = {"entry": "echo", "nodes": [{"id": "echo", "type": "output"}]}
    run = await start(http, graph_spec=graph, input="named")
    done = await wait_for_status(http, run["workflow_id"], ["completed"])
    assert done["graph_name"].startswith("inline-"), done
