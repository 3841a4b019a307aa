"""Which state keys a node's activity receives (``spindle.shared.graphs.state_reads``)."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.expressions import evaluate
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES, NodeTypeSpec, StateReads
from spindle.shared.graphs.state_reads import (
    ALWAYS_READ,
    expression_reads,
    node_state_reads,
    project_state,
    template_reads,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("expression", "keys"),
    [
        ("input.text", {"input"}),
        ("fetch", {"fetch"}),
        ('"node-1".items[0]', {"node-1"}),
        ("a.b.c", {"a"}),
        ("a[*].b", {"a"}),
        ("a[?b == `1`].c", {"a"}),
        ("a[?b == c]", {"a"}),  # the filter sees each element, not the state
        ("a | b", {"a"}),
        ("a || b", {"a", "b"}),
        ("a && !b", {"a", "b"}),
        ("a == b", {"a", "b"}),
        ("length(a) > `2`", {"a"}),
        ("sort_by(a, &b)[0]", {"a"}),
        ("[a, b.c]", {"a", "b"}),
        ("{x: a, y: b}", {"a", "b"}),
        ("a.{x: b, y: c}", {"a"}),
        ("a[]", {"a"}),
        ("a[1:2]", {"a"}),
        ('`{"x": 1}`', set()),
        ("'text'", set()),
        ("@.a", {"a"}),
        ("@ | a", {"a"}),
        ("max_by(items(a), &[1])", {"a"}),
    ],
)
def test_expression_reads_name_the_root_keys(expression: str, keys: set[str]) -> None:
    assert expression_reads(expression) == frozenset(keys)


@pytest.mark.parametrize("expression", ["@", "*", "*.x", "keys(@)", "[@, a]", "not valid ["])
def test_an_expression_that_may_read_everything_says_so(expression: str) -> None:
    assert expression_reads(expression) is None


def test_the_projection_answers_every_expression_like_the_whole_state() -> None:
    state: dict[str, Any] = {
        "input": {"n": 3, "xs": [{"b": 1, "c": 2}, {"b": 2, "c": 5}]},
        "a": {"b": [1, 2, 3], "c": "x"},
        "b": True,
        "other": {"big": "x" * 1000},
        "_previous": 1,
    }
    for expression in [
        "input.xs[?b == `2`].c",
        "a.b[1]",
        "a || b",
        "[a.c, input.n]",
        "{n: input.n, first: a.b[0]}",
        "sort_by(input.xs, &c)[-1].b",
        "length(a.b) > input.n",
    ]:
        reads = expression_reads(expression)
        assert reads is not None
        assert "other" not in reads
        projected = project_state(state, reads)
        assert evaluate(expression, projected) == evaluate(expression, state), expression


def test_template_reads_union_every_expression() -> None:
    assert template_reads("Hi {{ input.name }}, see {{ fetch.url }}") == {"input", "fetch"}
    assert template_reads("no expressions") == frozenset()
    assert template_reads("{{ @ }}") is None
    assert template_reads("{{ unclosed") is None


def node(type_: str, params: dict[str, Any], inputs: dict[str, str] | None = None) -> NodeSpec:
    return NodeSpec.model_validate(
        {"id": "n", "type": type_, "params": params, "inputs": inputs or {}}
    )


def test_a_tool_node_reads_its_inputs_and_templates_only() -> None:
    tool = node("tool", {"tool": "echo", "args": {"text": "{{ a.text }}"}}, {"n": "b.count"})
    assert node_state_reads(tool, BUILTIN_NODE_TYPES["tool"]) == ALWAYS_READ | {"a", "b"}


def test_router_conditions_and_output_select_and_message_are_reads() -> None:
    router = node(
        "router",
        {"routes": [{"when": "score > `3`", "port": "hi"}, {"when": "x.ok", "port": "ok"}]},
    )
    assert node_state_reads(router, BUILTIN_NODE_TYPES["router"]) == ALWAYS_READ | {"score", "x"}
    output = node("output", {"select": "summary.text", "message": "Done: {{ input.topic }}"})
    assert node_state_reads(output, BUILTIN_NODE_TYPES["output"]) == ALWAYS_READ | {
        "summary",
        "input",
    }


def test_a_type_that_reads_everything_or_is_unknown_gets_the_whole_state() -> None:
    free = NodeTypeSpec(name="free", reads_state=StateReads.ALL)
    assert node_state_reads(node("free", {}), free) is None
    assert node_state_reads(node("mystery", {}), None) is None
    whole = node("tool", {"tool": "echo", "args": {"x": "{{ @ }}"}})
    assert node_state_reads(whole, BUILTIN_NODE_TYPES["tool"]) is None


def test_projection_keeps_input_until_a_node_has_finished() -> None:
    state = {"input": 1, "context": {}, "meta": {}, "a": 2, "b": 3}
    assert project_state(state, ALWAYS_READ) == {"input": 1, "context": {}, "meta": {}}
    state["_previous"] = 2
    assert project_state(state, ALWAYS_READ) == {"context": {}, "meta": {}, "_previous": 2}
    assert project_state(state, None) == state


def test_a_map_reads_what_its_inline_node_reads() -> None:
    # The batch activity resolves the per-item node over the map's projection: an
    # inline template or input reading `input` must bring `input` along.
    node = NodeSpec.model_validate(
        {
            "id": "m",
            "type": "map",
            "params": {
                "over": "a.items",
                "node": {
                    "type": "tool",
                    "params": {"tool": "echo", "args": {"text": "{{ input.prefix }} {{ item }}"}},
                    "inputs": {"limit": "b.limit"},
                },
            },
        }
    )
    reads = node_state_reads(node, BUILTIN_NODE_TYPES["map"])
    assert reads is not None
    assert {"a", "b", "input"} <= reads
    assert "c" not in reads


def test_an_inline_node_of_an_unknown_type_reads_everything() -> None:
    node = NodeSpec.model_validate(
        {"id": "m", "type": "map", "params": {"over": "a", "node": {"type": "mine"}}}
    )
    assert node_state_reads(node, BUILTIN_NODE_TYPES["map"]) is None
