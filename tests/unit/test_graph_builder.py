"""The Python graph builder (``spindle.graphs``): the same documents as YAML, the
gateway's own validation locally (docs/graphs/builder.md)."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.examples import BUILDERS
from spindle.graphs import Graph
from spindle.shared.contracts.errors import ExecutorNotFound, GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.validation import graph_faults
from spindle.worker.examples import load_examples
from spindle.worker.offerings import build_catalog

pytestmark = pytest.mark.unit


def _document(spec: GraphSpec) -> dict[str, Any]:
    doc = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    # A YAML folded description (`>`) ends with one newline; the Python form has none.
    doc["description"] = doc["description"].strip()
    return doc


@pytest.mark.parametrize("spec", load_examples(), ids=lambda s: s.name)
def test_every_example_graph_is_built_alike_in_python(spec: GraphSpec) -> None:
    assert spec.name in BUILDERS, f"example '{spec.name}' has no Python form in spindle.examples"
    built = BUILDERS[spec.name]().validate()
    assert _document(built) == _document(spec)


def test_no_python_form_without_its_yaml() -> None:
    assert set(BUILDERS) == {spec.name for spec in load_examples()}


def test_local_validation_names_every_fault_like_the_gateway() -> None:
    g = Graph("faulty")
    start = g.tool("start", "no_such_tool")
    g.node("mystery", "no_such_type")
    g.output("orphan", select="start")
    g.edge(start, "nowhere")
    faults = g.faults()
    rules = {(f["node"], f["rule"]) for f in faults}
    assert ("mystery", "unknown_node_type") in rules
    assert any(f["node"] == "start" and "no_such_tool" in f["message"] for f in faults)
    assert any("nowhere" in f["message"] for f in faults)
    assert any(f["node"] == "orphan" for f in faults), "the unreachable node is named too"
    # The same list the gateway computes from the same catalog.
    assert faults == graph_faults(g.build(), build_catalog())
    with pytest.raises(ExecutorNotFound) as raised:
        g.validate()
    assert len(raised.value.errors) == len(faults)


def test_a_loop_needs_its_bound_and_builds_with_it() -> None:
    def looping(bound: int | None) -> Graph:
        g = Graph("looping")
        draft = g.tool("draft", "word_count", args={"text": "a b c"})
        check = g.tool("check", "word_count", args={"text": "a"})
        done = g.output("done", select="check")
        draft >> check
        g.edge(check, draft, when="check.words < `2`", max_iterations=bound)
        g.edge(check, done, when="check.words >= `2`")
        return g

    with pytest.raises(GraphInvalid) as raised:
        looping(None).validate()
    assert [e["rule"] for e in raised.value.errors] == ["unbounded_cycle"]
    spec = looping(3).validate()
    back = next(e for e in spec.edges if e.to == "draft")
    assert back.max_iterations == 3 and back.when == "check.words < `2`"
    assert spec.entry == "draft"


def test_ports_and_loop_helper_land_in_the_spec() -> None:
    g = Graph("ports", entry="ask")
    ask = g.prompt("ask", prompt="yes?", ui_schema={"type": "object"})
    route = g.router("route", [("ask.ok", "yes")], default="no")
    yes = g.output("yes", select="ask")
    no = g.output("no", select="ask")
    g.chain(ask, route)
    g.edge(route, yes, from_port="yes", to_port="answer")
    g.edge(route, no, from_port="no")
    g.loop(no, ask, max_iterations=2)
    spec = g.build()
    edges = {(e.from_, e.to): e for e in spec.edges}
    assert edges[("route", "yes")].from_port == "yes"
    assert edges[("route", "yes")].to_port == "answer"
    assert edges[("no", "ask")].max_iterations == 2


def test_a_node_added_twice_is_refused_with_its_id() -> None:
    g = Graph("twice")
    g.output("x", select="input")
    with pytest.raises(GraphInvalid, match="'x' is added twice"):
        g.output("x", select="input")


def test_an_explicit_catalog_is_used_instead_of_the_local_worker() -> None:
    g = Graph("plugin")
    g.node("p", "acme_greet", params={"name": "Ada"})
    assert any(f["rule"] == "unknown_node_type" for f in g.faults(Catalog.builtin()))
