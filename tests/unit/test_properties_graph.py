"""Properties of graph specs (contracts.graph_spec, graphs.validation).

Hypothesis builds graphs out of parts that are sometimes right and sometimes
wrong (node ids, types, parameters, edges, conditions, loop bounds) and checks
what the gateway relies on before it starts a run: a graph either validates or
is refused with ``GraphInvalid`` whose errors name the node and the rule, never
with another exception; a valid graph survives a JSON round trip unchanged;
and the loop-back detection agrees with the graph's shape.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from spindle.shared.contracts.errors import ExecutorNotFound, GraphInvalid, InputInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.structure import find_back_edges, parse_graph, validate_structure
from spindle.shared.graphs.validation import validate_graph, validate_run_input

pytestmark = pytest.mark.unit

FAST = settings(max_examples=100, deadline=None)

GOOD_IDS = ["a", "b", "c", "d", "e", "ask_1", "Review-2"]
BAD_IDS = ["", "1st", "input", "_previous", "has space", "x" * 70]
GOOD_EXPRESSIONS = ["input.topic", "`true`", "length(input.items) > `2`", "_previous.ok", "a.b"]
BAD_EXPRESSIONS = ["", "   ", "input.[", "foo(", "`unterminated", "a ||", "{{"]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
good_expressions = st.sampled_from(GOOD_EXPRESSIONS)
bad_expressions = st.sampled_from(BAD_EXPRESSIONS) | st.text(max_size=20)


@st.composite
def expressions(draw: st.DrawFn) -> str:
    """A JMESPath expression, now and then a broken one."""
    return draw(bad_expressions if rarely(draw) else good_expressions)


@st.composite
def templates(draw: st.DrawFn) -> str:
    """Text with ``{{ expression }}`` fields, now and then a broken one."""
    return f"{draw(st.text(max_size=10))}{{{{ {draw(expressions())} }}}}"


def params_for(node_type: str) -> st.SearchStrategy[dict[str, Any]]:
    """Parameters for a node type: mostly plausible, sometimes wrong."""
    by_type: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "tool": st.fixed_dictionaries(
            {"tool": st.sampled_from(["word_count", ""]) | st.integers()},
            optional={"args": st.dictionaries(st.text(max_size=5), json_values | templates())},
        ),
        "agent": st.fixed_dictionaries(
            {},
            optional={
                "instructions": templates(),
                "max_turns": st.integers(min_value=-1, max_value=120),
                "tools": st.lists(st.text(max_size=8), max_size=3),
                "temperature": st.floats(allow_nan=False, min_value=-1, max_value=3),
            },
        ),
        "prompt": st.fixed_dictionaries(
            {},
            optional={
                "prompt": templates(),
                "ui_schema": st.sampled_from(
                    [{"type": "object"}, {"type": 12}, {"required": "x"}, {}]
                ),
            },
        ),
        "router": st.fixed_dictionaries(
            {
                "routes": st.lists(
                    st.fixed_dictionaries(
                        {"when": expressions(), "port": st.sampled_from(["yes", "no", ""])}
                    ),
                    max_size=3,
                )
            },
            optional={"default": st.sampled_from(["no", "other"])},
        ),
        "output": st.fixed_dictionaries(
            {}, optional={"select": expressions(), "message": templates()}
        ),
    }
    fallback = st.dictionaries(st.text(max_size=6), json_values, max_size=3)
    return by_type.get(node_type, fallback)


def rarely(draw: st.DrawFn) -> bool:
    """True about one time in twenty: for mistakes that would hide all others."""
    # Hypothesis favours the ends of a range, so pick a value from its middle.
    return draw(st.integers(0, 19)) == 7


@st.composite
def node_documents(draw: st.DrawFn, node_id: str) -> dict[str, Any]:
    node_type = draw(st.sampled_from(["tool", "agent", "prompt", "router", "output", "teleport"]))
    node: dict[str, Any] = {"id": node_id, "type": node_type, "params": draw(params_for(node_type))}
    if draw(st.booleans()):
        node["inputs"] = draw(
            st.dictionaries(st.sampled_from(["tool", "prompt", "x"]), expressions())
        )
    if draw(st.booleans()):
        node["max_visits"] = draw(st.integers(min_value=0, max_value=60))
    if rarely(draw):
        node["surprise"] = True  # unknown field: forbidden
    return node


@st.composite
def graph_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A graph document as a client could send it, right or wrong."""
    ids = draw(st.lists(st.sampled_from(GOOD_IDS), min_size=1, max_size=6, unique=True))
    if rarely(draw):
        ids.append(draw(st.sampled_from(BAD_IDS)))
    if rarely(draw):
        ids.append(ids[0])  # a duplicate id
    edges: list[dict[str, Any]] = []
    if draw(st.booleans()):  # a spanning tree, so that node-level rules get their turn
        edges += [
            {"from": ids[draw(st.integers(0, j - 1))], "to": ids[j]} for j in range(1, len(ids))
        ]
    for _ in range(draw(st.integers(0, 6))):
        ends = [draw(st.sampled_from(ids)), draw(st.sampled_from(ids))]
        if rarely(draw):
            ends[draw(st.integers(0, 1))] = "ghost"
        edge: dict[str, Any] = {"from": ends[0], "to": ends[1]}
        if draw(st.booleans()):
            edge["when"] = draw(expressions())
        if draw(st.booleans()):
            edge["max_iterations"] = draw(st.integers(min_value=0, max_value=60))
        if draw(st.integers(0, 3)) == 0:
            edge["from_port"] = draw(st.sampled_from(["yes", "no", "maybe"]))
        edges.append(edge)
    return {
        "name": "bad name!" if rarely(draw) else draw(st.sampled_from(["g", "pipeline.v2"])),
        "entry": "ghost" if rarely(draw) else ids[0],
        "nodes": [draw(node_documents(node_id)) for node_id in ids],
        "edges": edges,
    }


def assert_names_node_and_rule(
    exc: GraphInvalid | ExecutorNotFound, document: dict[str, Any]
) -> None:
    assert exc.detail
    assert exc.errors, "a refused graph lists what is wrong"
    ids = {n.get("id") for n in document.get("nodes", []) if isinstance(n, dict)}
    ends = {e.get(k) for e in document.get("edges", []) for k in ("from", "to")}
    for error in exc.errors:
        assert error["rule"], error
        assert error["message"], error
        if error.get("node") is not None:
            assert error["node"] in ids | ends | {document.get("entry")}, error
            assert error["node"] in error["message"], error
        else:
            # A schema error outside any node names the field instead.
            assert error.get("field"), error


@FAST
@given(graph_documents())
def test_any_graph_validates_or_is_refused_naming_node_and_rule(document: dict[str, Any]) -> None:
    try:
        spec = parse_graph(document)
        validate_graph(spec, Catalog())
    except (GraphInvalid, ExecutorNotFound) as exc:  # the two documented refusals
        assert_names_node_and_rule(exc, document)
        if isinstance(exc, ExecutorNotFound):
            assert any(e["rule"] == "unknown_node_type" for e in exc.errors)
        return
    # Accepted: the structural rules really hold.
    ids = [n.id for n in spec.nodes]
    assert len(set(ids)) == len(ids)
    assert spec.entry in ids
    assert all(e.from_ in ids and e.to in ids for e in spec.edges)


@FAST
@given(
    json_values | st.dictionaries(st.sampled_from(["name", "entry", "nodes", "edges"]), json_values)
)
def test_any_json_document_parses_or_is_refused_as_graph_invalid(document: Any) -> None:
    try:
        spec = parse_graph(document)
    except GraphInvalid as exc:
        assert exc.detail
        return
    validate_structure(spec)


@FAST
@given(st.text(max_size=200))
def test_any_text_parses_or_is_refused_as_graph_invalid(text: str) -> None:
    try:
        parse_graph(text)
    except GraphInvalid as exc:
        assert exc.detail


plain_texts = st.text(max_size=40).filter(lambda t: "{{" not in t)
plain_values = st.recursive(
    json_scalars.filter(lambda v: not (isinstance(v, str) and "{{" in v)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)


@st.composite
def valid_params(draw: st.DrawFn, node_type: str) -> dict[str, Any]:
    if node_type == "tool":
        return {
            "tool": draw(st.sampled_from(["word_count", "echo"])),
            "args": draw(st.dictionaries(st.text(max_size=6), plain_values, max_size=3)),
        }
    if node_type == "agent":
        return draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "instructions": plain_texts,
                    "prompt": st.sampled_from(GOOD_EXPRESSIONS).map(lambda e: f"say {{{{ {e} }}}}"),
                    "max_turns": st.integers(min_value=1, max_value=100),
                    "temperature": st.floats(min_value=0, max_value=2),
                },
            )
        )
    if node_type == "prompt":
        return draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "prompt": plain_texts,
                    "title": plain_texts,
                    "ui_schema": st.just({"type": "object", "required": ["ok"]}),
                },
            )
        )
    return draw(
        st.fixed_dictionaries(
            {}, optional={"select": st.sampled_from(GOOD_EXPRESSIONS), "message": plain_texts}
        )
    )


@st.composite
def valid_graph_documents(draw: st.DrawFn) -> dict[str, Any]:
    """A graph that is valid by construction: every node reachable from ``n0``,
    every cycle bounded, every parameter and expression right; with any text in
    its descriptions, labels and literal arguments."""
    size = draw(st.integers(min_value=1, max_value=8))
    ids = [f"n{i}" for i in range(size)]
    pairs = [(draw(st.integers(0, j - 1)), j) for j in range(1, size)]
    pairs += draw(
        st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=6)
    )
    cyclic = any(j <= i for i, j in pairs)
    edges = []
    for i, j in pairs:
        edge: dict[str, Any] = {"from": ids[i], "to": ids[j]}
        if draw(st.booleans()):
            edge["when"] = draw(st.sampled_from(GOOD_EXPRESSIONS))
        if j <= i:
            edge["max_iterations"] = draw(st.integers(min_value=1, max_value=50))
        edges.append(edge)
    nodes = []
    for node_id in ids:
        node_type = draw(st.sampled_from(["tool", "agent", "prompt", "output"]))
        node: dict[str, Any] = {
            "id": node_id,
            "type": node_type,
            "params": draw(valid_params(node_type)),
        }
        if cyclic:  # DFS may pick any edge of a cycle as its loop-back
            node["max_visits"] = draw(st.integers(min_value=1, max_value=100))
        if draw(st.booleans()):
            node["label"] = draw(st.text(max_size=30))
        if draw(st.booleans()):
            node["retry"] = {
                "max_attempts": draw(st.integers(min_value=1, max_value=100)),
                "non_retryable_errors": draw(st.lists(st.text(max_size=10), max_size=2)),
            }
        if draw(st.booleans()):
            node["timeout_seconds"] = draw(st.floats(min_value=0.001, max_value=86400))
        if node_type == "tool" and draw(st.booleans()):
            node["inputs"] = {"args": draw(st.sampled_from(GOOD_EXPRESSIONS))}
        nodes.append(node)
    document: dict[str, Any] = {
        "name": draw(st.from_regex(r"[A-Za-z0-9_.\-]{1,20}", fullmatch=True)),
        "version": draw(st.text(max_size=8)),
        "description": draw(st.text(max_size=80)),
        "entry": "n0",
        "nodes": draw(st.permutations(nodes)),
        "edges": draw(st.permutations(edges)),
    }
    if draw(st.booleans()):
        document["input_schema"] = {"type": "object", "title": draw(st.text(max_size=20))}
    return document


def valid_specs() -> st.SearchStrategy[GraphSpec]:
    return valid_graph_documents().map(parse_graph)


@st.composite
def dag_documents(draw: st.DrawFn) -> dict[str, Any]:
    """An acyclic graph of tool nodes where every node is reachable from n0."""
    size = draw(st.integers(min_value=1, max_value=12))
    ids = [f"n{i}" for i in range(size)]
    edges = [{"from": ids[draw(st.integers(0, j - 1))], "to": ids[j]} for j in range(1, size)]
    for _ in range(draw(st.integers(0, 10))):
        if size < 2:
            break
        i = draw(st.integers(0, size - 2))
        j = draw(st.integers(i + 1, size - 1))
        edges.append(
            {"from": ids[i], "to": ids[j], "when": draw(st.sampled_from(GOOD_EXPRESSIONS))}
        )
    order = draw(st.permutations(range(len(edges))))
    return {
        "name": "dag",
        "entry": "n0",
        "nodes": [
            {"id": i, "type": "tool", "params": {"tool": "word_count", "args": {"text": i}}}
            for i in draw(st.permutations(ids))
        ],
        "edges": [edges[k] for k in order],
    }


@FAST
@given(valid_specs())
def test_a_valid_graph_survives_json_dump_and_parse(spec: GraphSpec) -> None:
    validate_graph(spec, Catalog())
    for dumped in (
        spec.model_dump_json(by_alias=True),
        spec.model_dump_json(by_alias=True, exclude_none=True),  # as GET /graphs/{name} serves it
    ):
        again = parse_graph(orjson.loads(dumped))
        assert again == spec
        validate_graph(again, Catalog())


@FAST
@given(dag_documents())
def test_a_dag_has_no_back_edges_and_validates(document: dict[str, Any]) -> None:
    spec = parse_graph(document)
    assert find_back_edges(spec) == set()
    validate_graph(spec, Catalog())


@FAST
@given(dag_documents(), st.data())
def test_an_edge_back_to_an_ancestor_is_a_back_edge(
    document: dict[str, Any], data: st.DataObject
) -> None:
    spec = parse_graph(document)
    assume(len(spec.nodes) >= 2)
    # Any node reaches n0's descendants; an edge from a node back to the entry closes a cycle.
    source = data.draw(st.sampled_from([n.id for n in spec.nodes]))
    looped = parse_graph({**document, "edges": [*document["edges"], {"from": source, "to": "n0"}]})
    back = find_back_edges(looped)
    assert back, "a cycle through the entry has a back edge"
    assert all(
        looped.edges[i].to in _ancestors_or_self(looped, looped.edges[i].from_) for i in back
    )
    with pytest.raises(GraphInvalid) as exc:
        validate_structure(looped)
    assert {(e["node"], e["rule"]) for e in exc.value.errors} == {("n0", "unbounded_cycle")}
    bounded = parse_graph(
        {
            **document,
            "edges": [*document["edges"], {"from": source, "to": "n0", "max_iterations": 3}],
        }
    )
    validate_structure(bounded)


@FAST
@given(valid_specs())
def test_forward_edges_form_a_dag(spec: GraphSpec) -> None:
    back = find_back_edges(spec)
    forward = [e for i, e in enumerate(spec.edges) if i not in back]
    indegree = {n.id: 0 for n in spec.nodes}
    for edge in forward:
        indegree[edge.to] += 1
    ready = [n for n, d in indegree.items() if d == 0]
    seen = 0
    while ready:
        current = ready.pop()
        seen += 1
        for edge in forward:
            if edge.from_ == current:
                indegree[edge.to] -= 1
                if indegree[edge.to] == 0:
                    ready.append(edge.to)
    assert seen == len(spec.nodes), "the forward edges contain a cycle"


@FAST
@given(json_values)
def test_run_input_is_accepted_or_refused_naming_the_field(value: Any) -> None:
    spec = parse_graph(
        {
            "name": "g",
            "entry": "a",
            "nodes": [{"id": "a", "type": "output"}],
            "input_schema": {
                "type": "object",
                "properties": {"topic": {"type": "string", "minLength": 1}},
                "required": ["topic"],
            },
        }
    )
    try:
        validate_run_input(spec, value)
    except InputInvalid as exc:
        assert exc.errors
        assert all(e["field"].startswith("input") and e["rule"] for e in exc.errors)
        return
    assert isinstance(value, dict) and isinstance(value.get("topic"), str) and value["topic"]


def _ancestors_or_self(spec: GraphSpec, node_id: str) -> set[str]:
    """Nodes on some path from the entry to ``node_id`` (including both ends)."""
    reaches = {node_id}
    changed = True
    while changed:
        changed = False
        for edge in spec.edges:
            if edge.to in reaches and edge.from_ not in reaches:
                reaches.add(edge.from_)
                changed = True
    return reaches
