"""Which recorded outputs a fork reuses: everything not reachable from ``from_node``."""

from __future__ import annotations

from spindle.shared.graphs.forks import reusable_nodes
from spindle.shared.graphs.structure import parse_graph


def graph() -> dict[str, object]:
    return {
        "name": "fork-shape",
        "entry": "a",
        "nodes": [
            {"id": "a", "type": "tool", "params": {"tool": "echo"}},
            {"id": "route", "type": "router", "params": {}},
            {"id": "b", "type": "tool", "params": {"tool": "echo"}},
            {"id": "c", "type": "tool", "params": {"tool": "echo"}},
            {"id": "d", "type": "output", "params": {}},
        ],
        "edges": [
            {"from": "a", "to": "route"},
            {"from": "route", "to": "b", "from_port": "left"},
            {"from": "route", "to": "c", "from_port": "right"},
            {"from": "b", "to": "d"},
            {"from": "c", "to": "d"},
        ],
    }


def test_from_node_and_its_descendants_run_again() -> None:
    assert reusable_nodes(parse_graph(graph()), "b") == {"a", "c"}


def test_port_deciders_are_never_reused() -> None:
    assert reusable_nodes(parse_graph(graph()), "d") == {"a", "b", "c"}


def test_forking_from_the_entry_reuses_nothing() -> None:
    assert reusable_nodes(parse_graph(graph()), "a") == set()
