"""A run's budget after its end (docs/graphs/budgets.md, "After the end"), on the
real stack: ``GET /runs/{id}``, the bundle and the ``run.completed`` webhook keep
the limits, the usage and the cap reached, for a registered graph and an inline
``graph_spec`` alike, and for a run failed at its cap.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.callback_receiver import callback_receiver
from tests.e2e.run_driver import start, wait_for_status
from tests.polling import eventually

pytestmark = pytest.mark.e2e

WAIT = 60.0


def agent_graph(name: str) -> dict[str, Any]:
    """One agent that calls the calculator once, then answers."""
    return {
        "name": name,
        "entry": "solver",
        "nodes": [
            {
                "id": "solver",
                "type": "agent",
                "params": {"tools": ["calculator"], "max_turns": 3, "prompt": "what is 6 * 7?"},
            }
        ],
        "edges": [],
    }


def assert_spent(budget: dict[str, Any] | None, *, tool_calls: int) -> None:
    assert budget is not None, "the budget is kept after the end"
    assert budget["limits"]["max_tool_calls"] == 5
    assert budget["limits"]["max_llm_tokens"] == 100_000
    assert budget["usage"]["tool_calls"] == tool_calls
    assert budget["usage"]["llm_tokens"] > 0
    assert budget["paused"] is False


async def test_a_named_graphs_budget_stays_on_the_run_the_bundle_and_the_webhook(
    http: httpx.AsyncClient, unique: str
) -> None:
    graph = agent_graph(f"budget-end-{unique}")
    registered = await http.put(f"/graphs/{graph['name']}", json=graph)
    assert registered.status_code in (200, 201), registered.text
    async with callback_receiver(lambda n: 200) as receiver:
        run = await start(
            http,
            graph=graph["name"],
            budget={"max_tool_calls": 5, "max_llm_tokens": 100_000},
            webhook={"url": receiver.url, "events": ["completed"]},
        )
        wf = run["workflow_id"]
        done = await wait_for_status(http, wf, {"completed"}, timeout=WAIT)

        async def delivered() -> dict[str, Any] | None:
            bodies = [b for b in receiver.bodies if b.get("type") == "run.completed"]
            return bodies[0] if bodies else None

        completed = await eventually(delivered, what="the run.completed webhook", timeout=WAIT)
    assert_spent(done["budget"], tool_calls=1)
    # Asked again later: not only while the closing query can still reach the worker.
    again = (await http.get(f"/runs/{wf}")).json()
    assert again["status"] == "completed"
    assert_spent(again["budget"], tool_calls=1)
    assert_spent(completed["data"]["budget"], tool_calls=1)
    bundle = await http.get(f"/runs/{wf}/bundle")
    assert bundle.status_code == 200, bundle.text
    assert_spent(bundle.json()["run"]["budget"], tool_calls=1)


async def test_an_inline_graph_spec_runs_budget_stays_after_the_end(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http,
        graph_spec=agent_graph(f"budget-inline-{unique}"),
        budget={"max_tool_calls": 5, "max_llm_tokens": 100_000},
    )
    wf = run["workflow_id"]
    await wait_for_status(http, wf, {"completed"}, timeout=WAIT)
    described = (await http.get(f"/runs/{wf}")).json()
    assert_spent(described["budget"], tool_calls=1)


async def test_a_run_failed_at_its_cap_keeps_the_cap_it_reached(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http,
        graph_spec=agent_graph(f"budget-failed-{unique}"),
        budget={"max_llm_tokens": 5, "on_exhausted": "fail"},
    )
    wf = run["workflow_id"]
    await wait_for_status(http, wf, {"failed"}, timeout=WAIT)
    budget = (await http.get(f"/runs/{wf}")).json()["budget"]
    assert budget is not None
    assert budget["exhausted"] == "max_llm_tokens"
    assert budget["usage"]["llm_tokens"] > 5
    assert budget["usage"]["tool_calls"] == 0
