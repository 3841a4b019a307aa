"""Items (seed 001) through ``GraphRun`` with the real worker: map, filter, merge.

The tools registered here are plain worker tools; the map runs them per item in
its batch activities, on the time-skipping server, with the real Redis bus and
the real Mongo wire server holding pages and attachments.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import NodeStatus
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.store.file_store import FileStore
from spindle.worker.examples import load_example
from spindle.worker.offerings import build_catalog
from spindle.worker.tools.registry import tool
from tests.workflow.runs import GraphRunner, M

pytestmark = pytest.mark.workflow

_in_flight = {"now": 0, "max": 0}


@tool(name="test_items_label")
def label(text: str, position: int) -> dict[str, Any]:
    """Label a text with its position; refuses the text "boom"."""
    if text == "boom":
        raise RuntimeError("the item exploded")
    return {"label": f"{position}:{text.upper()}"}


@tool(name="test_items_slow")
async def slow(value: int) -> int:
    """Take a little while, counting how many calls run at once."""
    _in_flight["now"] += 1
    _in_flight["max"] = max(_in_flight["max"], _in_flight["now"])
    try:
        await asyncio.sleep(0.05)  # the work of one item, long enough to overlap
    finally:
        _in_flight["now"] -= 1
    return value


@tool(name="test_items_render")
def render(name: str) -> bytes:
    """Render a name as a binary document."""
    return b"%PDF-fake " + name.encode() + b" \x00\xff"


def graph(nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> GraphSpec:
    spec = parse_graph(
        {"name": "items", "entry": nodes[0]["id"], "nodes": nodes, "edges": edges or []}
    )
    validate_graph(spec, build_catalog())  # every graph here is one the gateway accepts
    return spec


def label_map(**params: Any) -> dict[str, Any]:
    return {
        "id": "labels",
        "type": "map",
        "params": {
            "over": "input.rows",
            "node": {
                "type": "tool",
                "params": {"tool": "test_items_label"},
                "inputs": {"args": "{text: item.text, position: item_index}"},
            },
            **params,
        },
    }


ROWS = [
    {"id": "a", "text": "alpha"},
    {"text": "beta"},
    {"id": 7, "text": "boom"},
    {"text": None},
    {"id": "e", "text": "epsilon"},
    {"text": "zeta"},
    {"text": "eta"},
    {"text": "theta"},
    {"text": "iota"},
    {"text": "kappa"},
]


async def test_map_runs_each_item_with_item_and_index_and_records_item_errors(
    runner: GraphRunner,
) -> None:
    handle = await runner.start(graph([label_map(batch_size=4)]), {"rows": ROWS})
    result = await handle.result()

    output = result.output
    assert (output["succeeded"], output["failed"]) == (8, 2)
    items = output["items"]
    assert [item["id"] for item in items] == ["a", "1", "7", "3", "e", "5", "6", "7", "8", "9"]
    assert items[0] == {"id": "a", "data": {"label": "0:ALPHA"}}
    assert items[9] == {"id": "9", "data": {"label": "9:KAPPA"}}
    # An exception in the tool and a validation error of its arguments: each is the
    # item's own, with the map's node id; the run goes on.
    assert items[2]["error"]["nodeId"] == "labels"
    assert "the item exploded" in items[2]["error"]["message"]
    assert "text" in items[3]["error"]["message"]
    assert "Field required" in items[3]["error"]["message"]  # a null argument is dropped
    report = next(r for r in result.node_reports if r.node_id == "labels")
    assert report.status is NodeStatus.SUCCESS

    messages = await runner.messages(handle.id)
    progress = [m["d"] for m in messages if m["t"] == M.BATCH_PROGRESS]
    # One per batch of 4 (3 batches), after one UPDATE with the plan: never one per item.
    assert sorted(p["batch_index"] for p in progress) == [1, 2, 3]
    assert {p["batch_size"] for p in progress} == {3}
    last = max(progress, key=lambda p: p["done"])
    assert (last["done"], last["failed"], last["total"]) == (10, 2, 10)
    [plan] = [m for m in messages if m["t"] == M.UPDATE]
    assert plan["m"] == "labels: 10 items in 3 batches"


async def test_too_many_failed_items_fail_the_map_node(runner: GraphRunner) -> None:
    handle = await runner.start(graph([label_map(max_failed_ratio=0.1)]), {"rows": ROWS})
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert "node 'labels'" in cause.message
    assert "2 of 10 items failed" in cause.message
    assert "max_failed_ratio 0.1" in cause.message


async def test_within_max_failed_ratio_the_map_succeeds(runner: GraphRunner) -> None:
    handle = await runner.start(graph([label_map(max_failed_ratio=0.2)]), {"rows": ROWS})
    result = await handle.result()
    assert (result.output["succeeded"], result.output["failed"]) == (8, 2)


async def test_over_that_is_no_list_fails_naming_the_field(runner: GraphRunner) -> None:
    handle = await runner.start(graph([label_map()]), {"rows": {"not": "a list"}})
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError)
    assert "params.over" in cause.message
    assert "yielded a dict, not a list" in cause.message


async def test_concurrency_bounds_the_items_in_flight(runner: GraphRunner) -> None:
    for concurrency, batch_size in ((3, 4), (8, 4)):
        _in_flight["max"] = 0
        node = {
            "id": "slow",
            "type": "map",
            "params": {
                "over": "input",
                "concurrency": concurrency,
                "batch_size": batch_size,
                "node": {"type": "tool", "params": {"tool": "test_items_slow"}},
            },
        }
        node["params"]["node"]["inputs"] = {"args": "{value: item}"}
        handle = await runner.start(graph([node]), list(range(24)))
        result = await handle.result()
        assert result.output["succeeded"] == 24
        assert [item["data"] for item in result.output["items"]] == list(range(24))
        assert 1 < _in_flight["max"] <= concurrency


async def test_filter_splits_items_and_merge_joins_them_in_input_order(
    runner: GraphRunner,
) -> None:
    def doubled(node_id: str, over: str, factor: int) -> dict[str, Any]:
        return {
            "id": node_id,
            "type": "map",
            "params": {
                "over": over,
                "node": {
                    "type": "tool",
                    "params": {
                        "tool": "calculator",
                        "args": {"expression": "{{ item.data }} * " + str(factor)},
                    },
                },
            },
        }

    spec = graph(
        [
            {
                "id": "numbers",
                "type": "map",
                "params": {
                    "over": "input",
                    "node": {
                        "type": "tool",
                        "params": {"tool": "calculator", "args": {"expression": "{{ item }}"}},
                    },
                },
            },
            {
                "id": "big",
                "type": "filter",
                "params": {"items": "numbers.items", "where": "item.data > `5`"},
            },
            doubled("tens", "big.items", 10),
            doubled("negated", "big.rejected", -1),
            {"id": "joined", "type": "merge", "params": {"over": "[tens.items, negated.items]"}},
            {"id": "out", "type": "output", "params": {"select": "joined"}},
        ],
        [
            {"from": "numbers", "to": "big"},
            {"from": "big", "to": "tens", "from_port": "default"},
            {"from": "big", "to": "negated", "from_port": "rejected"},
            {"from": "tens", "to": "joined"},
            {"from": "negated", "to": "joined"},
            {"from": "joined", "to": "out"},
        ],
    )
    values = [3, 9, 1, 7, 6, 2]
    result = await (await runner.start(spec, values)).result()

    big = next(r for r in result.node_reports if r.node_id == "big")
    assert big.status is NodeStatus.SUCCESS
    assert result.output["items"] == [
        {"id": str(i), "data": v * 10 if v > 5 else -v} for i, v in enumerate(values)
    ]
    assert (result.output["succeeded"], result.output["failed"]) == (6, 0)


async def test_binary_results_are_stored_as_run_files_and_referenced(
    runner: GraphRunner,
) -> None:
    node = {
        "id": "docs",
        "type": "map",
        "params": {
            "over": "input.names",
            "node": {
                "type": "tool",
                "params": {"tool": "test_items_render", "args": {"name": "{{ item }}"}},
            },
        },
    }
    handle = await runner.start(graph([node]), {"names": ["ada", "grace"]})
    result = await handle.result()

    items = result.output["items"]
    assert [item["data"] for item in items] == [None, None]
    reference = items[1]["binary"]["data"]
    assert reference["file"] == "items/docs/1/1/data"
    assert reference["size"] == len(b"%PDF-fake grace \x00\xff")
    files = FileStore(runner.archive.database)
    stored = await files.get(tenant_id="default", workflow_id=handle.id, name=reference["file"])
    content = b"".join([piece async for piece in files.open(stored)])
    assert content == b"%PDF-fake grace \x00\xff"
    # The bytes are in the file store only: no event of the run's history holds them.
    history = await handle.fetch_history()
    assert not any(b"PDF-fake" in event.SerializeToString() for event in history.events)


async def test_the_review_triage_example_replies_to_the_negative_reviews(
    runner: GraphRunner,
) -> None:
    reviews = [
        {"id": "r1", "text": "Great product, fast and easy"},
        {"id": "r2", "text": "Broken again, I want a refund"},
        {"text": "It arrived on Tuesday"},
    ]
    handle = await runner.start(load_example("review-triage"), {"reviews": reviews})
    result = await handle.result()

    assert (result.output["negative"], result.output["failed"]) == (1, 0)
    items = result.output["reviews"]
    assert [item["id"] for item in items] == ["r1", "r2", "2"]
    assert [item["data"]["label"] for item in items] == ["positive", "negative", "neutral"]
    # The reply is joined onto the negative review only.
    assert items[1]["data"]["title"].startswith("Reply to review r2")
    assert "title" not in items[0]["data"]
    messages = await runner.messages(handle.id)
    [answer] = [m for m in messages if m["t"] == M.ANSWER]
    assert answer["m"] == "1 of 3 reviews need a reply"


async def test_a_map_over_nothing_outputs_no_items(runner: GraphRunner) -> None:
    for run_input in ({"rows": []}, {}):
        result = await (await runner.start(graph([label_map()]), run_input)).result()
        assert result.output == {"items": [], "succeeded": 0, "failed": 0}
