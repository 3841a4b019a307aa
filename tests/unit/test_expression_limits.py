"""Expressions and templates have a bounded cost (spindle.shared.graphs.expressions).

``input | [@,@] | [@,@] | ...`` doubles at each pipe: 23 pipes rendered a 176 MB
message, 30 would need ~22 GB. Such graphs are refused at registration by the
static complexity limit; what passes it is still capped when evaluated.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.graphs.expressions import (
    MAX_EVALUATION_STEPS,
    MAX_EXPRESSION_LENGTH,
    MAX_RESULT_SIZE,
    ExpressionError,
    ExpressionTooCostly,
    compile_expression,
    evaluate,
    render_template,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.worker.offerings import build_catalog

pytestmark = pytest.mark.unit


def bomb(pipes: int) -> str:
    """An expression whose result doubles at each pipe."""
    return "input" + " | [@,@]" * pipes


def graph(nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> Any:
    return parse_graph(
        {
            "name": "g",
            "entry": nodes[0]["id"],
            "nodes": nodes,
            "edges": edges
            if edges is not None
            else [{"from": a["id"], "to": b["id"]} for a, b in itertools.pairwise(nodes)],
        }
    )


def refusal(spec: Any) -> dict[str, Any]:
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, build_catalog())
    errors: list[dict[str, Any]] = exc.value.errors
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.parametrize("pipes", [23, 30])
def test_a_bomb_in_an_output_message_is_refused_naming_node_and_field(pipes: int) -> None:
    spec = graph(
        [
            {"id": "start", "type": "output"},
            {"id": "out", "type": "output", "params": {"message": f"Hi {{{{ {bomb(pipes)} }}}}"}},
        ]
    )
    error = refusal(spec)
    assert (error["node"], error["field"], error["rule"]) == (
        "out",
        "params.message",
        "expression_too_costly",
    )
    assert "node 'out': params.message: expression too costly" in error["message"]


@pytest.mark.parametrize("pipes", [23, 30])
def test_a_bomb_in_an_edge_condition_is_refused_naming_edge_and_field(pipes: int) -> None:
    spec = graph(
        [{"id": "a", "type": "output"}, {"id": "b", "type": "output"}],
        [{"from": "a", "to": "b", "when": bomb(pipes)}],
    )
    error = refusal(spec)
    assert (error["node"], error["field"], error["rule"]) == (
        "a",
        "edges[0].when",
        "expression_too_costly",
    )
    assert "edge a → b: when: expression too costly" in error["message"]


def test_select_router_and_input_mappings_are_limited_too() -> None:
    spec = graph(
        [
            {"id": "r", "type": "router", "params": {"routes": [{"when": bomb(12), "port": "x"}]}},
            {"id": "o", "type": "output", "params": {"select": bomb(11)}},
            {"id": "t", "type": "output", "inputs": {"select": bomb(10)}},
        ],
        [{"from": "r", "to": "o", "from_port": "x"}, {"from": "o", "to": "t"}],
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, build_catalog())
    found = {(e["node"], e["field"]) for e in exc.value.errors if "too costly" in e["message"]}
    assert ("t", "inputs.select") in found


def test_every_example_graph_stays_within_the_limits() -> None:
    from spindle.worker.examples import load_examples

    for spec in load_examples():
        validate_graph(spec, build_catalog())


@pytest.mark.parametrize(
    "expression",
    [
        "items[?price > `10`].{name: name, price: price} | sort_by(@, &price)",
        "join(', ', items[*].name)",
        "{a: a, b: b, c: [a, b, c], d: {x: a, y: b}}",
        "length(items) > `0` && !done",
    ],
)
def test_ordinary_expressions_pass(expression: str) -> None:
    compile_expression(expression)


def test_too_long_or_too_deep_expressions_are_refused_not_crashing() -> None:
    with pytest.raises(ExpressionTooCostly, match="too long"):
        compile_expression("a" * (MAX_EXPRESSION_LENGTH + 1))
    # Deep enough to exhaust the parser's recursion, short enough to pass the length.
    with pytest.raises(ExpressionTooCostly):
        compile_expression("(" * 1000 + "a" + ")" * 1000)


def test_too_many_syntax_nodes_is_refused() -> None:
    with pytest.raises(ExpressionTooCostly, match="syntax nodes"):
        compile_expression(", ".join(["[a"] * 20 + ["a"] * 600) + "]" * 20)


# --- evaluation caps: what passes the static limit but meets large data -------------


def test_evaluation_stops_at_the_result_size_cap() -> None:
    # 2**9 = 512 copies passes the static limit; over 100 KB of input it is 51 MB.
    data = {"input": "x" * 100_000}
    with pytest.raises(ExpressionTooCostly, match="larger than"):
        evaluate(bomb(9), data)
    assert len(evaluate(bomb(9), {"input": "x"})) == 2


def test_a_template_stops_at_the_size_cap_before_writing_it_out() -> None:
    data = {"input": "x" * 40_000}
    with pytest.raises(ExpressionTooCostly):
        render_template(f"{{{{ {bomb(9)} }}}}", data)
    # Each field alone is within the cap; together they pass it.
    chunk = {"input": "y" * (MAX_RESULT_SIZE // 4)}
    with pytest.raises(ExpressionTooCostly, match="template renders to more than"):
        render_template("{{ input }}" * 5, chunk)


def test_evaluation_stops_at_the_work_cap_counting_steps() -> None:
    data = {"items": [{"a": i} for i in range(MAX_EVALUATION_STEPS)]}
    with pytest.raises(ExpressionTooCostly, match="evaluation steps"):
        evaluate("items[?a > `-1`].a", data)
    assert evaluate("items[?a > `-1`].a", {"items": [{"a": 1}, {"a": 2}]}) == [1, 2]


def test_the_caps_are_expression_errors_callers_already_handle() -> None:
    assert issubclass(ExpressionTooCostly, ExpressionError)


def test_a_template_writes_integers_beyond_64_bits() -> None:
    assert render_template("n={{ n }}", {"n": [10**100]}) == f"n=[{10**100}]"


def test_too_deeply_nested_is_refused() -> None:
    with pytest.raises(ExpressionTooCostly, match="nested too deeply"):
        compile_expression("||".join("a" * 100))


def test_a_shared_budget_bounds_many_evaluations_together() -> None:
    # A node evaluating once per item (map, filter) bounds the node, not each item.
    from spindle.shared.graphs.expressions import EvaluationBudget

    budget = EvaluationBudget()
    item = {"a": list(range(1000))}
    with pytest.raises(ExpressionTooCostly, match="evaluation steps"):
        for _ in range(MAX_EVALUATION_STEPS):
            evaluate("a[*]", item, budget=budget)
    assert evaluate("a[*]", item) == list(range(1000))  # alone, well within


def test_a_node_budget_bounds_evaluations_and_templates_together() -> None:
    from spindle.shared.graphs.expressions import EvaluationBudget, ExpressionBudgetSpent

    budget = EvaluationBudget(limit=5_000, owner="node 'n'", setting="SPINDLE_X", yield_every=100)
    data = {"a": list(range(1000))}
    evaluate("a[*]", data, budget=budget)  # ~2,000 steps: fine alone
    render_template("{{ a[*] }}", data, budget=budget)  # the template spends from it too
    with pytest.raises(ExpressionBudgetSpent) as spent:
        evaluate("a[*]", data, budget=budget)
    assert "node 'n' spent its expression budget of 5000 evaluation steps" in str(spent.value)
    assert "SPINDLE_X" in str(spent.value)
    assert (spent.value.limit, spent.value.setting) == (5_000, "SPINDLE_X")
    assert evaluate("a[*]", data) == list(range(1000))  # a fresh budget: fine
