"""Items end to end over HTTP: a 10,000-item ``map`` through the worker and gateway processes.

The size users run: 10,000 items, some failing, posted as a run's input; the run
completes with the right counts, each failed item carries its error, the stream
shows aggregated BATCH_PROGRESS (never a message per item), and Temporal's
history stays bounded (a constant per batch).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import T, start, updates, wait_for_status

pytestmark = pytest.mark.e2e

ITEMS = 10_000
BATCH = 200  # Settings.item_batch_size's default


def row(i: int) -> dict[str, Any]:
    if i % 1000 == 17:
        return {"expr": "1/0"}  # the tool refuses: division by zero
    if i % 1000 == 523:
        return {"expr": i}  # no string: the tool's arguments do not validate
    return {"expr": f"{i} + 1"}


def map_graph(name: str, **params: Any) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "sums",
        "nodes": [
            {
                "id": "sums",
                "type": "map",
                "params": {
                    "over": "input.rows",
                    "concurrency": 400,
                    "node": {
                        "type": "tool",
                        "params": {"tool": "calculator"},
                        "inputs": {"args": "{expression: item.expr}"},
                    },
                    **params,
                },
            }
        ],
        "edges": [],
    }


async def test_a_10000_item_map_completes_with_counts_errors_and_bounded_history(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    rows = [row(i) for i in range(ITEMS)]
    run = await start(http, graph_spec=map_graph(f"map-{unique}"), input={"rows": rows})
    body = await wait_for_status(http, run["workflow_id"], {"completed", "failed"}, timeout=180)

    assert body["status"] == "completed", body.get("error")
    output = body["output"]
    assert (output["succeeded"], output["failed"]) == (ITEMS - 20, 20)
    items = output["items"]
    assert [item["id"] for item in items] == [str(i) for i in range(ITEMS)]
    assert items[4242] == {"id": "4242", "data": 4243}
    assert items[17]["error"] == {
        "message": "tool calculator failed: division by zero",
        "nodeId": "sums",
    }
    assert "expression" in items[9523]["error"]["message"]
    assert "valid string" in items[9523]["error"]["message"]
    failed = [item["id"] for item in items if "error" in item]
    assert failed == [str(i) for i in range(ITEMS) if i % 1000 in (17, 523)]

    messages = await updates(http, run)
    progress = [m["d"] for m in messages if m["t"] == T.BATCH_PROGRESS]
    assert sorted(p["batch_index"] for p in progress) == list(range(1, ITEMS // BATCH + 1))
    assert max(p["done"] for p in progress) == ITEMS
    final = next(p for p in progress if p["done"] == ITEMS)
    assert (final["failed"], final["total"]) == (20, ITEMS)
    assert len(messages) < 2 * len(progress)  # no message per item

    history = await stack.temporal.get_workflow_handle(run["workflow_id"]).fetch_history()
    events = len(history.events)
    size = sum(event.ByteSize() for event in history.events)
    # About four events per batch and no item in any of them.
    assert events < 8 * (ITEMS // BATCH) + 50, events
    assert size < 256 * 1024, size


async def test_a_map_with_bad_params_is_refused_with_a_422_naming_node_and_field(
    http: httpx.AsyncClient, unique: str
) -> None:
    spec = map_graph(f"bad-map-{unique}", concurrency=0)
    # A prompt cannot run per item (an agent can: docs/graphs/items.md).
    spec["nodes"][0]["params"]["node"] = {"type": "prompt", "params": {"prompt": "?"}}
    reply = await http.post("/runs", json={"graph_spec": spec, "input": {"rows": []}})
    assert reply.status_code == 422, reply.text
    errors = {(e["node"], e["field"], e["rule"]) for e in reply.json()["errors"]}
    assert errors == {
        ("sums", "params.concurrency", "greater_than_equal"),
        ("sums", "params.node.type", "not_per_item"),
    }


async def test_the_review_triage_example_runs_by_name(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    assert "review-triage" in examples
    reviews = [{"id": "r1", "text": "Great and fast"}, {"id": "r2", "text": "Broken, refund"}]
    run = await start(http, graph="review-triage", input={"reviews": reviews})
    body = await wait_for_status(http, run["workflow_id"], {"completed", "failed"}, timeout=60)

    assert body["status"] == "completed", body.get("error")
    assert body["output"]["negative"] == 1
    assert [item["id"] for item in body["output"]["reviews"]] == ["r1", "r2"]
    reports = {r["node_id"]: r for r in body["node_reports"]}
    assert reports["moods"]["output_summary"] == '{"succeeded":2,"failed":0}'
    messages = await updates(http, run)
    assert [m["m"] for m in messages if m["t"] == T.ANSWER] == ["1 of 2 reviews need a reply"]
