"""Graph and run-input validation before a run starts (spindle.shared.graphs.validation)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from spindle.shared.contracts.errors import ExecutorNotFound, GraphInvalid, InputInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog, NodeTypeInfo, ToolInfo
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph, validate_run_input
from spindle.worker.examples import load_examples
from spindle.worker.offerings import build_catalog

pytestmark = pytest.mark.unit

TOOLS = Catalog(
    tools={
        "search_notes": ToolInfo(
            name="search_notes",
            params_schema={
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["query"],
                "additionalProperties": False,
            },
        ),
        "calculator": ToolInfo(
            name="calculator",
            params_schema={
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        ),
    },
    tools_known=True,
)


def graph(
    *nodes: dict[str, Any], edges: list[dict[str, Any]] | None = None, **extra: Any
) -> GraphSpec:
    return parse_graph(
        {
            "name": "g",
            "entry": nodes[0]["id"],
            "nodes": list(nodes),
            "edges": edges
            if edges is not None
            else [{"from": a["id"], "to": b["id"]} for a, b in itertools.pairwise(nodes)],
            **extra,
        }
    )


def errors_of(exc: pytest.ExceptionInfo[Any]) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = exc.value.errors
    return errors


def test_every_example_validates_against_the_worker_catalog() -> None:
    catalog = build_catalog()
    names = []
    for spec in load_examples():
        validate_graph(spec, catalog)
        names.append(spec.name)
    assert {"research-agent", "approval-flow", "pipeline"} <= set(names)


def test_unknown_node_type_names_node_and_type() -> None:
    spec = graph(
        {"id": "a", "type": "tool", "params": {"tool": "calculator", "args": {"expression": "1"}}},
        {"id": "b", "type": "teleport"},
    )
    with pytest.raises(ExecutorNotFound) as exc:
        validate_graph(spec, TOOLS)
    [err] = errors_of(exc)
    assert err["node"] == "b" and err["rule"] == "unknown_node_type"
    assert "teleport" in str(exc.value) and "'b'" in str(exc.value)


def test_structure_errors_come_first() -> None:
    spec = graph({"id": "a", "type": "output"}, edges=[{"from": "a", "to": "ghost"}])
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    assert errors_of(exc)[0]["rule"] == "dangling_edge"


def test_every_fault_is_reported_in_one_answer() -> None:
    """A dangling edge, an unreachable node, an unknown type, bad params and an
    unbounded loop: each reported, none hiding another (issue 29, authoring)."""
    spec = graph(
        {"id": "a", "type": "agent", "params": {"max_turns": 0}},
        {"id": "b", "type": "teleport"},
        {"id": "c", "type": "tool", "params": {"tool": "nope"}},
        {"id": "island", "type": "output"},
        edges=[
            {"from": "a", "to": "b"},
            {"from": "b", "to": "ghost"},
            {"from": "b", "to": "c"},
            {"from": "c", "to": "a"},
        ],
    )
    with pytest.raises(ExecutorNotFound) as exc:
        validate_graph(spec, TOOLS, max_node_visits=10)
    found = {(e["node"], e["field"], e["rule"]) for e in errors_of(exc)}
    assert found == {
        ("ghost", "edges[1].to", "dangling_edge"),
        ("island", None, "unreachable_node"),
        ("a", "edges[3]", "unbounded_cycle"),
        ("b", "type", "unknown_node_type"),
        ("a", "params.max_turns", "greater_than_equal"),
        ("c", "params.tool", "unknown_tool"),
    }
    assert all(set(e) == {"node", "field", "rule", "message"} for e in errors_of(exc))


def test_a_missing_entry_skips_only_what_needs_the_entry() -> None:
    spec = parse_graph(
        {
            "name": "g",
            "entry": "start",
            "nodes": [
                {"id": "a", "type": "output"},
                {"id": "a", "type": "agent", "params": {"temperature": 9}},
            ],
            "edges": [{"from": "start", "to": "a"}],
        }
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    rules = sorted((e["field"], e["rule"]) for e in errors_of(exc))
    assert rules == [
        ("edges[0].from", "dangling_edge"),
        ("entry", "missing_entry"),
        ("id", "duplicate_node_id"),
        ("params.temperature", "less_than_equal"),
    ]


def test_visit_cap_is_checked_beside_a_dangling_edge() -> None:
    spec = graph(
        {"id": "a", "type": "output", "max_visits": 500},
        {"id": "b", "type": "output"},
        edges=[
            {"from": "a", "to": "b"},
            {"from": "b", "to": "a", "max_iterations": 400},
            {"from": "b", "to": "ghost"},
        ],
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS, max_node_visits=100)
    found = {(e["node"], e["rule"]) for e in errors_of(exc)}
    assert found == {
        ("ghost", "dangling_edge"),
        ("a", "exceeds_max_node_visits"),
        ("b", "exceeds_max_node_visits"),
    }


def test_bad_builtin_params_name_node_and_field() -> None:
    spec = graph({"id": "ask", "type": "agent", "params": {"max_turns": 0, "colour": "red"}})
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    fields = {(e["node"], e["field"], e["rule"]) for e in errors_of(exc)}
    assert ("ask", "params.max_turns", "greater_than_equal") in fields
    assert ("ask", "params.colour", "extra_forbidden") in fields


def test_params_covered_by_inputs_are_not_required() -> None:
    missing = graph({"id": "t", "type": "tool", "params": {}})
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(missing, TOOLS)
    assert errors_of(exc)[0]["field"] == "params.tool"
    covered = graph({"id": "t", "type": "tool", "inputs": {"tool": "input.which"}})
    validate_graph(covered, TOOLS)


def test_unknown_tools_are_refused_when_the_catalog_knows_tools() -> None:
    spec = graph(
        {"id": "t", "type": "tool", "params": {"tool": "teleporter"}},
        {"id": "a", "type": "agent", "params": {"tools": ["search_notes", "oracle"]}},
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    found = {(e["node"], e["field"]) for e in errors_of(exc)}
    assert found == {("t", "params.tool"), ("a", "params.tools[1]")}
    assert all(e["rule"] == "unknown_tool" for e in errors_of(exc))
    # Nobody has published tools yet: names cannot be checked, the graph passes.
    validate_graph(spec, Catalog())


def test_tool_args_are_checked_against_the_tool_schema() -> None:
    spec = graph(
        {
            "id": "t",
            "type": "tool",
            "params": {"tool": "search_notes", "args": {"limit": "three", "q": "x"}},
        }
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    rules = {(e["field"], e["rule"]) for e in errors_of(exc)}
    assert ("params.args.query", "required") in rules
    assert ("params.args.limit", "type") in rules
    assert ("params.args", "additionalProperties") in rules
    templated = graph(
        {
            "id": "t",
            "type": "tool",
            "params": {"tool": "search_notes", "args": {"query": "{{ input.q }}"}},
        }
    )
    validate_graph(templated, TOOLS)


def test_templates_and_expressions_must_compile() -> None:
    spec = graph(
        {"id": "a", "type": "agent", "params": {"prompt": "Tell me about {{ input.[ }}"}},
        {"id": "r", "type": "router", "params": {"routes": [{"when": "a ==", "port": "x"}]}},
        {"id": "o", "type": "output", "params": {"select": "{bad", "message": "{{ output"}},
        edges=[{"from": "a", "to": "r"}, {"from": "r", "to": "o", "from_port": "x"}],
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    found = {(e["node"], e["field"], e["rule"]) for e in errors_of(exc)}
    assert found == {
        ("a", "params.prompt", "bad_template"),
        ("r", "params.routes[0].when", "bad_condition"),
        ("o", "params.select", "bad_expression"),
        ("o", "params.message", "bad_template"),
    }


def test_router_edges_must_use_ports_the_router_produces() -> None:
    spec = graph(
        {
            "id": "r",
            "type": "router",
            "params": {"routes": [{"when": "input.ok", "port": "yes"}], "default": "no"},
        },
        {"id": "y", "type": "output"},
        {"id": "n", "type": "output"},
        edges=[
            {"from": "r", "to": "y", "from_port": "yes"},
            {"from": "r", "to": "n", "from_port": "maybe"},
        ],
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    [err] = errors_of(exc)
    assert err["node"] == "r" and err["rule"] == "unknown_port" and "maybe" in err["message"]


def test_prompt_ui_schema_must_be_a_json_schema() -> None:
    spec = graph({"id": "p", "type": "prompt", "params": {"ui_schema": {"type": "thing"}}})
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, TOOLS)
    assert errors_of(exc)[0]["field"] == "params.ui_schema"


def test_custom_node_types_use_their_published_schema() -> None:
    catalog = TOOLS.merged(
        Catalog(
            node_types={
                "shout": NodeTypeInfo(
                    name="shout",
                    params_schema={
                        "type": "object",
                        "properties": {"text": {"type": "string"}, "times": {"type": "integer"}},
                        "required": ["text"],
                    },
                )
            }
        )
    )
    bad = graph({"id": "s", "type": "shout", "params": {"times": "many"}})
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(bad, catalog)
    found = {(e["field"], e["rule"]) for e in errors_of(exc)}
    assert found == {("params.text", "required"), ("params.times", "type")}
    validate_graph(graph({"id": "s", "type": "shout", "inputs": {"text": "input"}}), catalog)


SCHEMA = {
    "type": "object",
    "properties": {
        "topic": {"type": "string", "minLength": 1},
        "options": {
            "type": "object",
            "properties": {"depth": {"type": "integer", "maximum": 3}},
            "required": ["depth"],
        },
    },
    "required": ["topic"],
}


def test_run_input_is_checked_against_the_input_schema() -> None:
    spec = graph({"id": "o", "type": "output"}, input_schema=SCHEMA)
    validate_run_input(spec, {"topic": "x", "options": {"depth": 2}})
    with pytest.raises(InputInvalid) as exc:
        validate_run_input(spec, {"options": {"depth": 9}})
    found = {(e["field"], e["rule"]) for e in errors_of(exc)}
    assert found == {("input.topic", "required"), ("input.options.depth", "maximum")}
    with pytest.raises(InputInvalid) as exc:
        validate_run_input(spec, {"topic": "x", "options": {}})
    assert errors_of(exc)[0]["field"] == "input.options.depth"
    with pytest.raises(InputInvalid) as exc:
        validate_run_input(spec, "just text")
    assert errors_of(exc)[0] == {
        "field": "input",
        "rule": "type",
        "message": "input: 'just text' is not of type 'object'",
    }


def test_graph_without_input_schema_accepts_any_input() -> None:
    validate_run_input(graph({"id": "o", "type": "output"}), ["anything", 1])
