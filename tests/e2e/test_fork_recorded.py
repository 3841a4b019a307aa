"""A recorded fork through ``POST /runs/{id}/fork {"tools": "recorded", "llm": "recorded"}``:
the worker answers every tool call and LLM turn from the source run's records
(docs/replay-and-compare.md#recorded-replay).
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.run_driver import start, updates, wait_for_status

pytestmark = pytest.mark.e2e


async def test_a_recorded_fork_answers_from_the_source_records(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    source_run = await start(
        http, graph="research-agent", input={"question": f"What is Temporal? {unique} 17 * 3"}
    )
    source = await wait_for_status(http, source_run["workflow_id"], {"completed"})

    reply = await http.post(
        f"/runs/{source['workflow_id']}/fork", json={"tools": "recorded", "llm": "recorded"}
    )
    assert reply.status_code == 201, reply.text
    fork_run = reply.json()
    fork = await wait_for_status(http, fork_run["workflow_id"], {"completed"})

    assert fork["output"] == source["output"]
    messages = await updates(http, fork_run)
    tools = [m["d"] for m in messages if "tool" in (m.get("d") or {})]
    assert {d["tool"] for d in tools} == {"search_notes", "calculator"}
    assert all(d["recorded"] is True for d in tools), tools
    turns = [m["d"] for m in messages if "turn" in (m.get("d") or {}) and "model" in m["d"]]
    assert turns and all(d["recorded"] is True for d in turns), turns
    # The source's own messages carry no flag: it replayed nothing.
    assert not [m for m in await updates(http, source_run) if "recorded" in (m.get("d") or {})]


@pytest.mark.parametrize(
    ("graph", "run_input"),
    [
        ("pipeline", {"text": "The export is broken and slow, I want a refund."}),
        (
            "review-triage",
            {"reviews": [{"id": "r1", "text": "Great, fast"}, {"id": "r2", "text": "Broken"}]},
        ),
        ("delegation", {"topic": "durable execution"}),
    ],
)
async def test_a_pure_recorded_fork_of_an_example_ends_the_same(
    http: httpx.AsyncClient, examples: list[str], graph: str, run_input: dict[str, object]
) -> None:
    source_run = await start(http, graph=graph, input=run_input)
    source = await wait_for_status(http, source_run["workflow_id"], {"completed"}, timeout=60)
    reply = await http.post(
        f"/runs/{source['workflow_id']}/fork", json={"tools": "recorded", "llm": "recorded"}
    )
    assert reply.status_code == 201, reply.text
    fork_run = reply.json()
    fork = await wait_for_status(http, fork_run["workflow_id"], {"completed"}, timeout=60)
    assert fork["output"] == source["output"]
    details = [m.get("d") or {} for m in await updates(http, fork_run)]
    flags = [d["recorded"] for d in details if "recorded" in d]
    assert all(flags), flags
    assert flags or graph == "review-triage"  # a map's items post no message per call
