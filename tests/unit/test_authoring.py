"""Authoring aids (issue 29): the generated reference pages are in step with the code,
YAML graph bodies are read with line and column on a mistake, an inline graph gets a
name, and an agent's structured answer is checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from spindle.cli.authoring_reference import (
    NODE_PARAMS_PAGE,
    TOOLS_PAGE,
    render_node_params,
    render_tools,
)
from spindle.gateway.http.documents import load_yaml
from spindle.shared.contracts.errors import InvalidRequest
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES
from spindle.shared.graphs.structure import name_inline_graph, parse_graph
from spindle.worker.contracts import ChatMessage
from spindle.worker.llm.structured_output import answer_problems, with_schema_note
from spindle.worker.offerings import build_catalog

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "regenerate: python -m spindle.cli.authoring_reference --write"


@pytest.mark.parametrize(
    ("page", "render"), [(NODE_PARAMS_PAGE, render_node_params), (TOOLS_PAGE, render_tools)]
)
def test_generated_pages_are_in_step(page: str, render: object) -> None:
    assert callable(render)
    assert (ROOT / page).read_text(encoding="utf-8") == render(), f"{page} is stale; {REGENERATE}"


def test_every_param_and_tool_is_on_its_page() -> None:
    params = render_node_params()
    for name, spec in BUILTIN_NODE_TYPES.items():
        if spec.params is not None:
            assert f"## {name}\n" in params
            for field in spec.params.model_fields:
                assert f"| `{field}` |" in params, (name, field)
    tools = render_tools()
    for tool in build_catalog().tools.values():
        if tool.source == "builtin":
            assert f"### `{tool.name}`" in tools


def test_agent_params_have_meanings() -> None:
    agent = BUILTIN_NODE_TYPES["agent"].params
    assert agent is not None
    missing = [n for n, f in agent.model_fields.items() if not f.description]
    assert not missing, f"give these agent params a description=: {missing}"


def test_yaml_is_read_as_json_values() -> None:
    body = b"name: g\nentry: a\nnodes:\n  - id: a\n    type: output\n    params: {select: input}\n"
    assert load_yaml(body) == {
        "name": "g",
        "entry": "a",
        "nodes": [{"id": "a", "type": "output", "params": {"select": "input"}}],
    }
    assert load_yaml(b"when: 2024-01-02\n") == {"when": "2024-01-02"}


@pytest.mark.parametrize(
    ("body", "line", "column", "words"),
    [
        (b"name: g\nnodes: [a, b\nentry: a\n", 3, 6, "expected ',' or ']'"),
        (b"name: g\n  entry: a\n", 2, 8, "mapping values are not allowed"),
        (b"a: &x [1]\nb: *x\n", 2, 4, "aliases"),
    ],
)
def test_bad_yaml_names_line_and_column(body: bytes, line: int, column: int, words: str) -> None:
    with pytest.raises(InvalidRequest) as exc:
        load_yaml(body)
    [error] = exc.value.errors
    assert (error["line"], error["column"], error["rule"]) == (line, column, "yaml_invalid")
    assert words in exc.value.detail and f"line {line}, column {column}" in exc.value.detail


def test_yaml_holds_only_what_json_can() -> None:
    with pytest.raises(InvalidRequest, match="JSON cannot hold"):
        load_yaml(b"x: .nan\n")
    with pytest.raises(InvalidRequest, match="deeper than"):
        load_yaml(b"x: " + b"[" * 80 + b"]" * 80 + b"\n")


def test_an_inline_graph_without_a_name_gets_one_from_its_content() -> None:
    doc = {"entry": "a", "nodes": [{"id": "a", "type": "output"}]}
    named = name_inline_graph(doc)
    assert named["name"].startswith("inline-") and len(named["name"]) == len("inline-") + 12
    assert name_inline_graph(dict(doc))["name"] == named["name"], "the same spec, the same name"
    other = name_inline_graph({**doc, "description": "x"})
    assert other["name"] != named["name"]
    assert parse_graph(named).name == named["name"]
    assert name_inline_graph({**doc, "name": "mine"})["name"] == "mine"


def test_structured_answers_are_checked() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert answer_problems(schema, '```json\n{"n": 2}\n```') == ({"n": 2}, [])
    _, problems = answer_problems(schema, '{"n": "two"}')
    assert [(p["field"], p["rule"]) for p in problems] == [("output.n", "type")]
    _, problems = answer_problems(schema, "{}")
    assert [(p["field"], p["rule"]) for p in problems] == [("output.n", "required")]
    _, problems = answer_problems(schema, "two")
    assert [p["rule"] for p in problems] == ["json_invalid"]
    noted = with_schema_note([ChatMessage(role="system", content="be nice")], schema)
    assert [m.role for m in noted] == ["system", "system"] and '"n"' in (noted[1].content or "")
