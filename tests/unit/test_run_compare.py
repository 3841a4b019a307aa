"""The pure compare core: per node, only-in-one, the bounded output diff, totals."""

from __future__ import annotations

from spindle.shared.contracts.compare import CompareSide, NodeUsage
from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.runs import ReplayedNode
from spindle.shared.graphs.run_compare import compare_runs, json_diff, relation


def report(node_id: str, status: str, payload: object = None, visit: int = 1) -> dict[str, object]:
    return {
        "node_id": node_id,
        "node_type": "tool",
        "status": status,
        "visit": visit,
        "duration_ms": 10.0,
        "output": {"payload": payload},
    }


def test_diff_paths_ops_and_bound() -> None:
    diff = json_diff(
        {"a": 1, "list": [1, 2], "gone": True, "odd key": {"x": 1}},
        {"a": 2, "list": [1, 2, 3], "new": None, "odd key": {"x": 1}},
    )
    assert [(d.path, d.op, d.a, d.b) for d in diff] == [
        ("$.a", "changed", 1, 2),
        ("$.gone", "removed", True, None),
        ("$.list[2]", "added", None, 3),
        ("$.new", "added", None, None),
    ]
    assert json_diff({"x": [1]}, {"x": [1]}) == []
    assert len(json_diff(list(range(50)), list(range(1, 51)), max_entries=5)) == 6


def test_nodes_only_in_one_side_reused_outputs_and_totals() -> None:
    a = CompareSide(
        workflow_id="run-a",
        graph_name="pipeline",
        output={"priority": "normal"},
        reports=[
            report("keywords", "SUCCESS", ["x"]),
            report("mood", "SUCCESS", {"label": "positive"}),
            report("escalation", "SKIPPED"),
            report("summary", "SUCCESS", {"priority": "normal"}),
        ],
        usage={"mood": NodeUsage(tokens=5, cost=0.5, tool_calls=1)},
    )
    b = CompareSide(
        workflow_id="run-b",
        graph_name="pipeline-candidate",
        output={"priority": "high"},
        reports=[
            report("keywords", "REUSED"),
            report("mood", "SUCCESS", {"label": "positive"}),
            report("escalation", "SUCCESS", {"priority": "high"}),
            report("summary", "SKIPPED"),
        ],
        replayed={"keywords": ReplayedNode(output=["x"])},
        forked_from=ReplaySource(workflow_id="run-a", from_node="mood", graph="pipeline-candidate"),
    )
    related = relation(a, b)
    assert related == "run-b is a fork of run-a"
    compared = compare_runs(a, b, related=related)
    assert [n.node_id for n in compared.nodes] == ["keywords", "mood"]
    assert all(n.same_output for n in compared.nodes)
    assert [n.node_id for n in compared.only_a] == ["summary"]
    assert [n.node_id for n in compared.only_b] == ["escalation"]
    assert not compared.output.same
    assert [(d.path, d.op) for d in compared.output.diff] == [("$.priority", "changed")]
    assert compared.totals["a"].tokens == 5 and compared.totals["delta"].tokens == -5
    assert compared.totals["a"].nodes == 3


def test_unrelated_runs() -> None:
    assert (
        relation(
            CompareSide(workflow_id="a", graph_name="x"),
            CompareSide(workflow_id="b", graph_name="y"),
        )
        is None
    )
