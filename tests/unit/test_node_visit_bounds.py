"""A bound the graph states is the bound (issue 28, item 1).

No hidden cap: a node without ``max_visits`` on a loop bounded by its edge runs as
often as the edge allows; the one safety cap is the ``max_node_visits`` setting,
which validation names and which fails a run (never ends it ``completed``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.loop_bounds import max_visits_by_node
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.settings import Settings
from spindle.worker.workflows.scheduler import (
    LEGACY_VISITS_LIMIT,
    GraphScheduler,
    NodeVisitCapReached,
)

pytestmark = pytest.mark.unit


def loop(iterations: int, **target: Any) -> GraphSpec:
    """a → b → (back to a, ``max_iterations``): 2 x (1 + iterations) executions."""
    return parse_graph(
        {
            "name": "loop",
            "entry": "a",
            "nodes": [
                {"id": "a", "type": "output", "params": {"select": "input"}, **target},
                {"id": "b", "type": "output", "params": {"select": "input"}},
            ],
            "edges": [
                {"from": "a", "to": "b"},
                {"from": "b", "to": "a", "max_iterations": iterations},
            ],
        }
    )


def run(scheduler: GraphScheduler) -> tuple[dict[str, int], list[str]]:
    """Drive the scheduler to its end; executions per node and the warnings."""
    counts: dict[str, int] = {}
    warnings: list[str] = []
    advance = scheduler.start()
    ready = list(advance.ready)
    while ready:
        activation = ready.pop(0)
        counts[activation.node_id] = counts.get(activation.node_id, 0) + 1
        advance = scheduler.complete(activation.node_id, [], {})
        ready.extend(advance.ready)
        warnings.extend(advance.warnings)
    assert scheduler.finished
    return counts, warnings


def test_an_edge_bound_past_a_thousand_is_the_bound() -> None:
    counts, warnings = run(GraphScheduler(loop(1500)))
    assert counts == {"a": 1501, "b": 1501}  # 3,002 executions, no hidden cap at 1,000
    assert len(warnings) == 1 and "max_iterations (1500)" in warnings[0]


def test_a_run_recorded_before_the_patch_keeps_the_old_cap() -> None:
    asked: list[bool] = []

    def legacy() -> bool:
        asked.append(True)
        return True

    counts, warnings = run(GraphScheduler(loop(1500), legacy_cap=legacy))
    assert counts == {"a": LEGACY_VISITS_LIMIT, "b": LEGACY_VISITS_LIMIT}
    assert asked and "max_visits (1000)" in warnings[0]


def test_the_safety_cap_raises_naming_the_setting() -> None:
    scheduler = GraphScheduler(loop(1500), max_node_visits=40)
    with pytest.raises(NodeVisitCapReached, match="max_node_visits setting") as caught:
        run(scheduler)
    assert caught.value.node_id == "a" and caught.value.cap == 40


def test_a_node_s_own_max_visits_below_the_cap_is_its_bound() -> None:
    counts, warnings = run(GraphScheduler(loop(1500, max_visits=7), max_node_visits=40))
    assert counts["a"] == 7
    assert any("max_visits (7)" in w for w in warnings)


def test_loop_bounds_multiply_over_nested_loops() -> None:
    spec = parse_graph(
        {
            "name": "nested",
            "entry": "outer",
            "nodes": [
                {"id": n, "type": "output", "params": {"select": "input"}}
                for n in ("outer", "inner", "check", "end")
            ],
            "edges": [
                {"from": "outer", "to": "inner"},
                {"from": "inner", "to": "check"},
                {"from": "check", "to": "inner", "max_iterations": 3},
                {"from": "check", "to": "outer", "max_iterations": 4},
                {"from": "check", "to": "end"},
            ],
        }
    )
    bounds = max_visits_by_node(spec)
    assert bounds["outer"] == 5  # 1 + 4
    # inner: once per pass, +3 per pass: 5 passes x (1 + 3) = 20
    assert bounds["inner"] == 20 and bounds["check"] == 20
    assert bounds == {**bounds, "end": 20}
    assert max_visits_by_node(loop(1500)) == {"a": 1501, "b": 1501}
    assert max_visits_by_node(loop(10_000, max_visits=10))["a"] == 10
    assert math.isinf(
        max_visits_by_node(
            parse_graph(
                {
                    "name": "open",
                    "entry": "a",
                    "nodes": [{"id": "a", "type": "output", "params": {"select": "input"}}],
                    "edges": [{"from": "a", "to": "a"}],
                }
            )
        )["a"]
    )


def test_validation_names_the_setting_when_a_graph_would_reach_it() -> None:
    validate_graph(loop(1500), Catalog(), max_node_visits=1501)
    with pytest.raises(GraphInvalid) as caught:
        validate_graph(loop(1500), Catalog(), max_node_visits=1000)
    rules = {(e["node"], e["rule"]) for e in caught.value.errors}
    assert rules == {("a", "exceeds_max_node_visits"), ("b", "exceeds_max_node_visits")}
    assert "max_node_visits setting (1,000" in str(caught.value)
    assert "1,501 times" in str(caught.value)


def test_the_setting_is_documented_with_a_default() -> None:
    settings = Settings()
    assert settings.max_node_visits == 100_000
    assert Settings.model_fields["max_node_visits"].description
