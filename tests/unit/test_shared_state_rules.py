"""Shared state and payload schemas: the registration rules and how writes apply
(docs/graphs/index.md#shared-state, #payload-schemas)."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.shared.contracts.envelope import StateUpdate
from spindle.shared.contracts.errors import StateWriteRefused
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import graph_faults
from spindle.worker.contracts.shared_state import applied

pytestmark = pytest.mark.unit

WORDS = {"tool": "word_count", "args": {"text": "a b"}}


def _faults(nodes: list[dict[str, Any]], **extra: Any) -> list[tuple[Any, Any, str]]:
    spec = parse_graph({"name": "g", "entry": nodes[0]["id"], "nodes": nodes, **extra})
    return [(e["node"], e["field"], e["rule"]) for e in graph_faults(spec, Catalog.builtin())]


def test_writes_must_be_declared_writable() -> None:
    node = {"id": "n", "type": "tool", "params": WORDS, "writes": ["count", "other"]}
    assert _faults([node], state={"writable": ["count"]}) == [
        ("n", "writes", "undeclared_state_key")
    ]
    # Without shared state no key is writable.
    assert _faults([{**node, "writes": ["count"]}]) == [("n", "writes", "undeclared_state_key")]
    assert _faults([node], state={"writable": ["count", "other"]}) == []


def test_a_key_declared_twice_and_a_node_called_state_are_refused() -> None:
    nodes = [{"id": "state", "type": "tool", "params": WORDS}]
    assert _faults(nodes, state={"writable": ["a", "a"]}) == [
        (None, "state.writable", "duplicate_state_key"),
        ("state", "id", "reserved_state_key"),
    ]


def test_payload_schemas_are_valid_and_only_where_they_are_checked() -> None:
    tool = {"id": "t", "type": "tool", "params": WORDS, "input_schema": {"type": 3}}
    agent = {"id": "a", "type": "agent", "params": {"prompt": "hi"}, "output_schema": {}}
    faults = _faults([tool, agent], edges=[{"from": "t", "to": "a"}])
    assert ("t", "input_schema", "bad_schema") in faults
    assert ("a", "output_schema", "schema_not_checked") in faults


def test_writes_apply_set_then_merge_then_delete() -> None:
    update = StateUpdate(set={"a": 1, "gone": 2}, merge={"log": {"x": 1}}, delete=["gone"])
    result = applied({"log": {"w": 0}}, update, what="state", allowed=None, max_bytes=1024)
    assert result == {"a": 1, "log": {"w": 0, "x": 1}}


def test_refusals_name_the_key_and_the_size() -> None:
    with pytest.raises(StateWriteRefused, match="state key 'b' is not writable"):
        applied({}, StateUpdate(set={"b": 1}), what="state", allowed={"a"}, max_bytes=1024)
    with pytest.raises(StateWriteRefused, match="holds a int, not an object"):
        applied({"a": 1}, StateUpdate(merge={"a": {}}), what="state", allowed=None, max_bytes=1024)
    with pytest.raises(StateWriteRefused) as refused:
        applied(
            {}, StateUpdate(set={"big": "x" * 2000}), what="context", allowed=None, max_bytes=1024
        )
    assert "context key 'big' is 2,002 bytes" in str(refused.value)
    assert "over the shared_state_max_bytes setting (1,024" in str(refused.value)
    # A write that shrinks a context already over the bound is taken.
    big = {"big": "x" * 2000, "small": 1}
    assert applied(big, StateUpdate(delete=["small"]), what="context", allowed=None, max_bytes=1024)


def test_expressions_may_read_only_declared_state_keys() -> None:
    node = {
        "id": "n",
        "type": "tool",
        "params": {"tool": "word_count", "args": {"text": "{{ state.notes }}"}},
        "inputs": {"args": "{text: state.cnt}"},
    }
    done = {"id": "done", "type": "output"}
    edges = [{"from": "n", "to": "done", "when": "state.count > `1` && items[?state.other]"}]
    assert _faults([node, done], edges=edges, state={"writable": ["count"]}) == [
        ("n", "inputs.args", "undeclared_state_key"),
        ("n", "params.args", "undeclared_state_key"),
    ]
    # Without shared state, `state` is whatever the run state holds under it.
    assert _faults([node, done], edges=edges) == []
