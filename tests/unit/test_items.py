"""Items (seed 001): map/filter/merge params and validation, item ids, batch lanes, joins."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.node_params import MergeParams
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.worker.activities.map_items import item_id
from spindle.worker.contracts import ItemPlan, RunRef
from spindle.worker.nodes.filter_merge import run_merge
from spindle.worker.offerings import build_catalog
from spindle.worker.registry import NodeContext
from spindle.worker.workflows.map_batches import lanes

pytestmark = pytest.mark.unit

TOOL_NODE = {"type": "tool", "params": {"tool": "word_count", "args": {"text": "{{ item.text }}"}}}


def tool_node(args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool", "params": {"tool": "word_count", "args": args}}


def map_node(**params: Any) -> dict[str, Any]:
    return {"id": "m", "type": "map", "params": {"over": "input.rows", "node": TOOL_NODE, **params}}


def refusals(node: dict[str, Any]) -> set[tuple[str, str, str]]:
    spec = parse_graph({"name": "g", "entry": node["id"], "nodes": [node], "edges": []})
    with pytest.raises(GraphInvalid) as exc:
        validate_graph(spec, build_catalog())
    for error in exc.value.errors:
        # Every message names the node and the field, as the 422 shows it.
        assert str(error["message"]).startswith(f"node 'm': {error['field']}: ")
    return {(e["node"], e["field"], e["rule"]) for e in exc.value.errors}


def test_a_map_whose_items_use_item_and_item_index_is_valid() -> None:
    node = map_node(concurrency=1000, max_failed_ratio=0.0)
    node["params"]["node"] = {
        "type": "tool",
        "params": {"tool": "word_count"},
        "inputs": {"args": "{text: join(' ', [item.text, to_string(item_index)])}"},
    }
    spec = parse_graph({"name": "g", "entry": "m", "nodes": [node], "edges": []})
    validate_graph(spec, build_catalog())


@pytest.mark.parametrize(
    ("params", "field", "rule"),
    [
        ({"concurrency": 0}, "params.concurrency", "greater_than_equal"),
        ({"concurrency": 1001}, "params.concurrency", "less_than_equal"),
        ({"max_failed_ratio": 1.5}, "params.max_failed_ratio", "less_than_equal"),
        ({"max_failed_ratio": -0.1}, "params.max_failed_ratio", "greater_than_equal"),
        ({"batch_size": 0}, "params.batch_size", "greater_than_equal"),
        ({"over": "rows[?"}, "params.over", "bad_expression"),
        (
            {"node": {"type": "prompt", "params": {"prompt": "?"}}},
            "params.node.type",
            "not_per_item",
        ),
        (
            {"node": {"type": "agent", "params": {"tools": ["launch_workstream"]}}},
            "params.node.params.tools",
            "not_per_item",
        ),
        (
            {
                "node": {
                    "type": "agent",
                    "params": {"mcp_servers": [{"name": "x", "url": "http://x"}]},
                }
            },
            "params.node.params.mcp_servers",
            "not_per_item",
        ),
        (
            {"node": {"type": "agent", "params": {"tools": ["nope"]}}},
            "params.node.params.tools[0]",
            "unknown_tool",
        ),
        ({"node": {"type": "map", "params": {}}}, "params.node.type", "not_per_item"),
        ({"node": {"type": "nope"}}, "params.node.type", "unknown_node_type"),
        (
            {"node": {"type": "tool", "params": {"tool": "nope"}}},
            "params.node.params.tool",
            "unknown_tool",
        ),
        ({"node": tool_node({"text": "{{ item"})}, "params.node.params.args.text", "bad_template"),
        ({"node": tool_node({"txt": "x"})}, "params.node.params.args", "additionalProperties"),
        ({"node": {"params": {}}}, "params.node.type", "missing"),
    ],
)
def test_bad_map_params_are_refused_naming_node_and_field(
    params: dict[str, Any], field: str, rule: str
) -> None:
    assert ("m", field, rule) in refusals(map_node(**params))


def test_filter_and_merge_expressions_are_checked() -> None:
    bad_filter = {"id": "m", "type": "filter", "params": {"items": "a.items", "where": "item.["}}
    assert ("m", "params.where", "bad_expression") in refusals(bad_filter)
    assert ("m", "params.over", "missing") in refusals({"id": "m", "type": "merge"})


@pytest.mark.parametrize(
    ("value", "index", "expected"),
    [
        ({"id": "order-7", "x": 1}, 3, "order-7"),
        ({"id": 42}, 3, "42"),
        ({"id": True}, 3, "3"),
        ({"id": None}, 3, "3"),
        ("plain", 5, "5"),
        ([1, 2], 0, "0"),
    ],
)
def test_item_id_is_the_elements_id_else_its_position(
    value: Any, index: int, expected: str
) -> None:
    assert item_id(value, index) == expected


@pytest.mark.parametrize(
    ("concurrency", "pages", "batch_size", "expected"),
    [
        (16, 50, 200, (1, 16)),
        (1000, 50, 200, (5, 200)),
        (450, 50, 200, (2, 200)),
        (1000, 2, 200, (2, 200)),
        (1, 3, 4, (1, 1)),
        (8, 6, 4, (2, 4)),
    ],
)
def test_batches_in_flight_never_exceed_the_concurrency(
    concurrency: int, pages: int, batch_size: int, expected: tuple[int, int]
) -> None:
    plan = ItemPlan(total=pages * batch_size, pages=pages, batch_size=batch_size)
    batches, per_batch = lanes(concurrency, plan)
    assert (batches, per_batch) == expected
    assert batches * per_batch <= concurrency


async def test_merge_joins_items_by_id_and_keeps_errors() -> None:
    state = {
        "left": {"items": [{"id": "x", "data": {"a": 1}}, {"id": "y", "data": {"a": 2}}]},
        "right": {
            "items": [
                {"id": "y", "error": {"message": "late", "nodeId": "r"}},
                {"id": "x", "data": {"b": 3}},
                {"id": "z", "data": "new"},
            ]
        },
    }
    ctx = NodeContext(
        node=NodeSpec(id="join", type="merge"),
        params=MergeParams(over="[left.items, right.items, skipped.items]"),
        state=state,
        run=RunRef(workflow_id="w", run_id="r", stream_id="w", graph_name="g"),
        poster=None,  # type: ignore[arg-type]  # merge posts nothing
    )
    result = await run_merge(ctx)
    assert result.data == {
        "items": [
            {"id": "x", "data": {"a": 1, "b": 3}},
            {"id": "y", "data": {"a": 2}, "error": {"message": "late", "nodeId": "r"}},
            {"id": "z", "data": "new"},
        ],
        "succeeded": 2,
        "failed": 1,
    }
