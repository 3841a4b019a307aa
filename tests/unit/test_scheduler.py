"""The graph scheduler on its own: which nodes run, in what waves, which are skipped."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.worker.workflows.scheduler import Activation, GraphScheduler, NodeState

pytestmark = pytest.mark.unit

# A node's behaviour in a simulated run: (state, visit) -> (output, ports)
Behaviour = Callable[[dict[str, Any], int], tuple[Any, list[str]]]


@dataclass
class Trace:
    """What a simulated run did."""

    waves: list[list[str]] = field(default_factory=list)
    executed: list[tuple[str, int]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def order(self) -> list[str]:
        return [node for node, _ in self.executed]


def graph(entry: str, nodes: dict[str, dict[str, Any]], edges: list[dict[str, Any]]) -> GraphSpec:
    spec = parse_graph(
        {
            "name": "g",
            "entry": entry,
            "nodes": [{"id": n, "type": "tool", **extra} for n, extra in nodes.items()],
            "edges": edges,
        }
    )
    validate_structure(spec)
    return spec


def simulate(
    spec: GraphSpec,
    behaviours: dict[str, Behaviour] | None = None,
    *,
    run_input: Any = None,
    max_steps: int = 500,
) -> Trace:
    """Run the scheduler to completion, executing each wave of ready nodes in order.

    Nodes not in ``behaviours`` output their own id and choose no port.
    """
    behaviours = behaviours or {}
    scheduler = GraphScheduler(spec)
    trace = Trace(state={"input": run_input, "context": {}, "meta": {}, "_previous": run_input})
    advance = scheduler.start()
    wave: list[Activation] = []

    def absorb(adv: Any) -> None:
        wave.extend(adv.ready)
        trace.skipped.extend(s.node_id for s in adv.skipped)
        trace.warnings.extend(adv.warnings)

    absorb(advance)
    steps = 0
    while wave:
        current, wave[:] = list(wave), []
        trace.waves.append([a.node_id for a in current])
        for activation in current:
            steps += 1
            assert steps < max_steps, "simulation did not terminate"
            behave = behaviours.get(activation.node_id)
            output, ports = (
                behave(trace.state, activation.visit) if behave else (activation.node_id, [])
            )
            trace.state[activation.node_id] = output
            trace.state["_previous"] = output
            trace.executed.append((activation.node_id, activation.visit))
            absorb(scheduler.complete(activation.node_id, ports, trace.state))
    assert scheduler.finished
    return trace


def test_linear_chain_runs_each_node_once_in_order() -> None:
    spec = graph(
        "a", {"a": {}, "b": {}, "c": {}}, [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}]
    )
    trace = simulate(spec)
    assert trace.executed == [("a", 1), ("b", 1), ("c", 1)]
    assert trace.waves == [["a"], ["b"], ["c"]]
    assert trace.skipped == []
    assert trace.state["_previous"] == "c"


def test_parallel_branches_run_in_one_wave_and_join_waits_for_both() -> None:
    spec = graph(
        "start",
        {"start": {}, "left": {}, "right": {}, "deep": {}, "join": {}},
        [
            {"from": "start", "to": "left"},
            {"from": "start", "to": "right"},
            {"from": "right", "to": "deep"},
            {"from": "left", "to": "join"},
            {"from": "deep", "to": "join"},
        ],
    )
    trace = simulate(spec)
    assert trace.waves == [["start"], ["left", "right"], ["deep"], ["join"]]
    assert trace.order.count("join") == 1


def test_join_is_released_only_when_its_last_input_resolves() -> None:
    spec = graph(
        "s",
        {"s": {}, "a": {}, "b": {}, "j": {}},
        [
            {"from": "s", "to": "a"},
            {"from": "s", "to": "b"},
            {"from": "a", "to": "j"},
            {"from": "b", "to": "j"},
        ],
    )
    scheduler = GraphScheduler(spec)
    scheduler.start()
    ready = scheduler.complete("s", [], {})
    assert [a.node_id for a in ready.ready] == ["a", "b"]
    assert scheduler.complete("a", [], {}).ready == []
    assert scheduler.state_of("j") is NodeState.PENDING
    assert [a.node_id for a in scheduler.complete("b", [], {}).ready] == ["j"]


def test_conditional_edges_follow_state_and_skips_propagate() -> None:
    spec = graph(
        "check",
        {"check": {}, "big": {}, "big_followup": {}, "small": {}, "done": {}},
        [
            {"from": "check", "to": "big", "when": "check.amount > `100`"},
            {"from": "check", "to": "small", "when": "check.amount <= `100`"},
            {"from": "big", "to": "big_followup"},
            {"from": "big_followup", "to": "done"},
            {"from": "small", "to": "done"},
        ],
    )
    small = simulate(spec, {"check": lambda s, v: ({"amount": 5}, [])})
    assert small.order == ["check", "small", "done"]
    assert small.skipped == ["big", "big_followup"]

    big = simulate(spec, {"check": lambda s, v: ({"amount": 500}, [])})
    assert big.order == ["check", "big", "big_followup", "done"]
    assert big.skipped == ["small"]


def test_condition_can_read_input_context_and_meta() -> None:
    spec = graph(
        "a",
        {"a": {}, "b": {}},
        [{"from": "a", "to": "b", "when": "input.go && meta.ok"}],
    )

    def set_meta(state: dict[str, Any], visit: int) -> tuple[Any, list[str]]:
        state["meta"]["ok"] = True
        return "a", []

    assert simulate(spec, {"a": set_meta}, run_input={"go": True}).order == ["a", "b"]
    assert simulate(spec, {"a": set_meta}, run_input={"go": False}).skipped == ["b"]


def test_router_ports_choose_the_branch() -> None:
    spec = graph(
        "route",
        {"route": {"type": "router"}, "yes": {}, "no": {}, "end": {}},
        [
            {"from": "route", "to": "yes", "from_port": "approved"},
            {"from": "route", "to": "no", "from_port": "rejected"},
            {"from": "yes", "to": "end"},
            {"from": "no", "to": "end"},
        ],
    )
    approved = simulate(spec, {"route": lambda s, v: ("approved", ["approved"])})
    assert approved.order == ["route", "yes", "end"]
    assert approved.skipped == ["no"]
    rejected = simulate(spec, {"route": lambda s, v: ("rejected", ["rejected"])})
    assert rejected.order == ["route", "no", "end"]
    assert rejected.skipped == ["yes"]


def test_port_and_condition_must_both_hold() -> None:
    spec = graph(
        "r",
        {"r": {}, "x": {}},
        [{"from": "r", "to": "x", "from_port": "p", "when": "input.flag"}],
    )
    assert simulate(spec, {"r": lambda s, v: (1, ["p"])}, run_input={"flag": False}).skipped == [
        "x"
    ]
    assert simulate(spec, {"r": lambda s, v: (1, ["q"])}, run_input={"flag": True}).skipped == ["x"]
    assert simulate(spec, {"r": lambda s, v: (1, ["p"])}, run_input={"flag": True}).order == [
        "r",
        "x",
    ]


def test_diamond_with_one_side_skipped_still_runs_the_join_once() -> None:
    spec = graph(
        "a",
        {"a": {}, "b": {}, "c": {}, "d": {}},
        [
            {"from": "a", "to": "b", "when": "`false`"},
            {"from": "a", "to": "c"},
            {"from": "b", "to": "d"},
            {"from": "c", "to": "d"},
        ],
    )
    trace = simulate(spec)
    assert trace.order == ["a", "c", "d"]
    assert trace.skipped == ["b"]


def test_join_with_every_input_skipped_is_skipped_too() -> None:
    spec = graph(
        "a",
        {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}},
        [
            {"from": "a", "to": "b", "when": "`false`"},
            {"from": "a", "to": "c", "when": "`false`"},
            {"from": "b", "to": "d"},
            {"from": "c", "to": "d"},
            {"from": "d", "to": "e"},
        ],
    )
    trace = simulate(spec)
    assert trace.order == ["a"]
    assert sorted(trace.skipped) == ["b", "c", "d", "e"]
    assert trace.skipped.count("d") == 1


def test_entry_with_several_successors_fans_out() -> None:
    spec = graph(
        "entry",
        {"entry": {}, "x": {}, "y": {}, "z": {}},
        [
            {"from": "entry", "to": "x"},
            {"from": "entry", "to": "y"},
            {"from": "entry", "to": "z", "when": "`false`"},
        ],
    )
    trace = simulate(spec)
    assert trace.waves == [["entry"], ["x", "y"]]
    assert trace.skipped == ["z"]


def test_single_node_graph_finishes_after_the_entry() -> None:
    scheduler = GraphScheduler(graph("only", {"only": {}}, []))
    assert scheduler.start().ready == [Activation("only", 1)]
    assert not scheduler.finished
    assert scheduler.complete("only", [], {}).ready == []
    assert scheduler.finished


def _loop_graph(**bounds: Any) -> GraphSpec:
    """draft → review → (back to draft unless approved) | publish when approved."""
    edge_bounds = {k: v for k, v in bounds.items() if k == "max_iterations"}
    node_bounds = {k: v for k, v in bounds.items() if k == "max_visits"}
    return graph(
        "start",
        {"start": {}, "draft": node_bounds, "review": {}, "publish": {}},
        [
            {"from": "start", "to": "draft"},
            {"from": "draft", "to": "review"},
            {"from": "review", "to": "draft", "when": "!(review.ok)", **edge_bounds},
            {"from": "review", "to": "publish", "when": "review.ok"},
        ],
    )


def _approve_on(visit_ok: int) -> dict[str, Behaviour]:
    return {"review": lambda s, v: ({"ok": v >= visit_ok}, [])}


def test_bounded_loop_repeats_until_the_condition_clears() -> None:
    trace = simulate(_loop_graph(max_iterations=5), _approve_on(3))
    assert trace.executed == [
        ("start", 1),
        ("draft", 1),
        ("review", 1),
        ("draft", 2),
        ("review", 2),
        ("draft", 3),
        ("review", 3),
        ("publish", 1),
    ]
    # The node that looped back does not skip its forward branch while looping.
    assert trace.skipped == []
    assert trace.warnings == []


def test_loop_hitting_max_iterations_warns_and_stops_repeating() -> None:
    trace = simulate(_loop_graph(max_iterations=2), _approve_on(99))
    assert trace.order.count("draft") == 3  # first pass + 2 iterations
    assert trace.order.count("review") == 3
    assert trace.skipped == ["publish"]
    assert len(trace.warnings) == 1
    assert "max_iterations (2)" in trace.warnings[0]


def test_loop_bounded_by_max_visits_of_its_target() -> None:
    trace = simulate(_loop_graph(max_visits=2), _approve_on(99))
    assert trace.order.count("draft") == 2
    assert trace.skipped == ["publish"]
    assert len(trace.warnings) == 1
    assert "max_visits (2)" in trace.warnings[0]


def test_loop_reentry_keeps_branches_from_outside_the_loop() -> None:
    """A join inside the loop fed from outside does not wait for that branch again."""
    spec = graph(
        "s",
        {"s": {}, "side": {}, "body": {}, "join": {}, "end": {}},
        [
            # body first: the DFS from the entry then sees join → body as the loop-back
            {"from": "s", "to": "body"},
            {"from": "s", "to": "side"},
            {"from": "side", "to": "join"},
            {"from": "body", "to": "join"},
            {"from": "join", "to": "body", "when": "join < `3`", "max_iterations": 5},
            {"from": "join", "to": "end", "when": "join >= `3`"},
        ],
    )
    trace = simulate(spec, {"join": lambda s, v: (v, [])})
    assert trace.order.count("side") == 1
    assert trace.order.count("body") == 3
    assert trace.executed[-1] == ("end", 1)


def test_nested_loop_counts_restart_with_each_outer_iteration() -> None:
    spec = graph(
        "outer",
        {"outer": {}, "inner": {}, "check": {}, "end": {}},
        [
            {"from": "outer", "to": "inner"},
            {"from": "inner", "to": "check"},
            {"from": "check", "to": "inner", "when": "check.again", "max_iterations": 1},
            {"from": "check", "to": "outer", "when": "check.outer_again", "max_iterations": 1},
            {"from": "check", "to": "end"},
        ],
    )
    calls = {"n": 0}

    def check(state: dict[str, Any], visit: int) -> tuple[Any, list[str]]:
        calls["n"] += 1
        # Even calls are at the end of an inner loop: go round the outer loop once.
        return {"again": calls["n"] % 2 == 1, "outer_again": calls["n"] == 2}, []

    trace = simulate(spec, {"check": check})
    assert trace.order.count("outer") == 2
    assert trace.order.count("inner") == 4  # the inner loop ran again in the 2nd outer pass
    assert trace.order[-1] == "end"


def test_complete_rejects_a_node_that_is_not_running() -> None:
    scheduler = GraphScheduler(graph("a", {"a": {}, "b": {}}, [{"from": "a", "to": "b"}]))
    scheduler.start()
    with pytest.raises(ValueError, match="'b' is not running"):
        scheduler.complete("b", [], {})


def test_long_skip_chains_do_not_recurse() -> None:
    n = 1000
    nodes = {f"n{i}": {} for i in range(n)}
    edges = [{"from": "n0", "to": "n1", "when": "`false`"}] + [
        {"from": f"n{i}", "to": f"n{i + 1}"} for i in range(1, n - 1)
    ]
    trace = simulate(graph("n0", nodes, edges))
    assert len(trace.skipped) == n - 1


def test_a_snapshot_restored_in_a_new_scheduler_carries_on_the_loop() -> None:
    """Continue-as-new: a scheduler rebuilt from a snapshot mid-loop decides the same."""
    spec = _loop_graph(max_iterations=3)
    reference = simulate(spec, {"review": lambda s, v: ({"ok": False}, [])})

    first = GraphScheduler(spec)
    executed: list[tuple[str, int]] = []
    state: dict[str, Any] = {"input": None}
    ready = first.start().ready
    scheduler = first
    while ready:
        [activation] = ready
        executed.append((activation.node_id, activation.visit))
        state[activation.node_id] = {"ok": False}
        ready = scheduler.complete(activation.node_id, [], state).ready
        if len(executed) == 4:
            # Hand everything to a fresh scheduler, as the next generation does.
            scheduler = GraphScheduler(spec)
            scheduler.restore(first.snapshot().model_copy(deep=True))
    assert executed == reference.executed
    assert scheduler.finished
    assert scheduler.visits("draft") == 4


def test_a_snapshot_of_another_graph_is_refused() -> None:
    snapshot = GraphScheduler(_loop_graph(max_iterations=3)).snapshot()
    other = GraphScheduler(graph("x", {"x": {}}, []))
    with pytest.raises(ValueError, match="does not fit"):
        other.restore(snapshot.model_copy(update={"node_states": {"draft": "pending"}}))
