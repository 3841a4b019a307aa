"""Budgets and deadlines over HTTP on the real stack (docs/graphs/budgets.md).

A run started with a token cap pauses at it before its next step, says which
limit on its stream, shows ``paused`` with limits and usage on ``GET
/runs/{id}``, and goes on to completion once ``POST /runs/{id}/budget`` raises
the cap. Every new field refuses bad input with a 422 naming it, and the
workstream deadline route refuses an unknown launch (404) and an extension past
the run's own deadline (409).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.run_driver import T, start, wait_for_status
from tests.polling import eventually

pytestmark = pytest.mark.e2e

WAIT = 30.0
PROBLEM = "application/problem+json"


def agent_graph(name: str) -> dict[str, Any]:
    """One agent that calls the calculator, then answers: two LLM turns, one tool call."""
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


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = reply.json()
    return body


async def messages_of(http: httpx.AsyncClient, run: dict[str, Any]) -> list[dict[str, Any]]:
    reply = await http.get(f"/runs/{run['workflow_id']}/{run['run_id']}/updates")
    assert reply.status_code == 200
    found: list[dict[str, Any]] = reply.json()["messages"]
    return found


async def test_a_run_paused_at_its_budget_resumes_when_the_budget_is_raised(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http,
        graph_spec=agent_graph(f"budget-{unique}"),
        budget={"max_llm_tokens": 5, "max_cost_usd": 100},
    )
    wf = run["workflow_id"]
    paused = await wait_for_status(http, wf, {"paused"}, timeout=WAIT)
    budget = paused["budget"]
    assert budget["exhausted"] == "max_llm_tokens"
    assert budget["limits"]["max_llm_tokens"] == 5
    assert budget["on_exhausted"] == "pause"
    spent = budget["usage"]["llm_tokens"]
    assert spent > 5
    assert budget["usage"]["tool_calls"] == 0, "paused before the tool call"
    assert budget["usage"]["cost_usd"] > 0, "priced by SPINDLE_MODEL_PRICES"

    warning = [m for m in await messages_of(http, run) if m["t"] == T.WARNING][-1]
    assert "max_llm_tokens" in warning["m"]
    assert warning["d"]["budget"]["exhausted"] == "max_llm_tokens"

    below = problem(await http.post(f"/runs/{wf}/budget", json={"max_llm_tokens": 2}), 409)
    assert "max_llm_tokens" in below["detail"]
    assert (await http.get(f"/runs/{wf}")).json()["status"] == "paused"

    raised = await http.post(f"/runs/{wf}/budget", json={"max_llm_tokens": 100_000})
    assert raised.status_code == 200, raised.text
    assert raised.json()["resumed"] is True
    assert raised.json()["budget"]["limits"]["max_cost_usd"] == 100

    done = await wait_for_status(http, wf, {"completed"}, timeout=WAIT)
    assert "42" in str(done["output"])
    kinds = [m["t"] for m in await messages_of(http, run)]
    assert kinds[-1] == T.COMPLETE


async def test_a_cost_cap_pauses_naming_max_cost_usd_and_cancel_works_while_paused(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http, graph_spec=agent_graph(f"cost-{unique}"), budget={"max_cost_usd": 0.000001}
    )
    wf = run["workflow_id"]
    paused = await wait_for_status(http, wf, {"paused"}, timeout=WAIT)
    assert paused["budget"]["exhausted"] == "max_cost_usd"
    assert (await http.post(f"/runs/{wf}/cancel")).status_code == 202
    await wait_for_status(http, wf, {"canceled"}, timeout=WAIT)
    assert (await messages_of(http, run))[-1]["t"] == T.TERMINATED


async def test_on_exhausted_fail_fails_the_run_naming_the_limit(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http,
        graph_spec=agent_graph(f"fail-{unique}"),
        budget={"max_llm_tokens": 5, "on_exhausted": "fail"},
    )
    failed = await wait_for_status(http, run["workflow_id"], {"failed"}, timeout=WAIT)
    assert "budget exhausted: max_llm_tokens" in failed["error"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"budget": {"max_llm_tokens": 0}}, "max_llm_tokens"),
        ({"budget": {"max_tool_calls": "many"}}, "max_tool_calls"),
        ({"budget": {"max_cost_usd": -1}}, "max_cost_usd"),
        ({"budget": {"on_exhausted": "explode"}}, "on_exhausted"),
        ({"budget": {"max_steps": 3}}, "max_steps"),
        ({"budget": 5}, "budget"),
        ({"deadline_seconds": 5}, "deadline_seconds"),
        ({"deadline_seconds": "soon"}, "deadline_seconds"),
        ({"children_policy": "abandon"}, "children_policy"),
    ],
)
async def test_bad_budget_and_deadline_fields_are_a_422_naming_the_field(
    http: httpx.AsyncClient, extra: dict[str, Any], field: str
) -> None:
    body = problem(await http.post("/runs", json={"graph": "approval-flow", **extra}), 422)
    assert any(field in (e.get("field") or "") for e in body["errors"]), body
    assert field in body["detail"]


async def test_the_budget_route_refuses_bad_caps_naming_the_field(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "budget route"})
    wf = run["workflow_id"]
    await wait_for_status(http, wf, {"paused"}, timeout=WAIT)
    for payload, field in (
        ({"max_llm_tokens": 0}, "max_llm_tokens"),
        ({"max_cost_usd": "a lot"}, "max_cost_usd"),
        ({"on_exhausted": "fail"}, "on_exhausted"),
    ):
        body = problem(await http.post(f"/runs/{wf}/budget", json=payload), 422)
        assert field in body["detail"], body
    # A run without a budget may be given one.
    given = await http.post(f"/runs/{wf}/budget", json={"max_tool_calls": 50})
    assert given.status_code == 200, given.text
    described = (await http.get(f"/runs/{wf}")).json()
    assert described["budget"]["limits"]["max_tool_calls"] == 50
    assert described["status"] == "paused", "still waiting on its human"
    await http.post(f"/runs/{wf}/cancel")


async def test_the_deadline_route_refuses_unknown_and_past_the_parent(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(
        http, graph="approval-flow", input={"topic": "deadlines"}, deadline_seconds=120
    )
    wf = run["workflow_id"]
    described = await wait_for_status(http, wf, {"paused"}, timeout=WAIT)
    assert described["deadline_at"]

    unknown = problem(
        await http.post(f"/runs/{wf}/workstreams/ws-9/deadline", json={"extend_seconds": 10}), 404
    )
    assert "ws-9" in unknown["detail"]

    launched = await http.post(
        f"/runs/{wf}/workstreams", json={"task": "Sum 2 and 3.", "deadline_seconds": 600}
    )
    assert launched.status_code == 202, launched.text
    ack = launched.json()
    assert ack["deadline_seconds"] <= 120, "cut to the run's remaining time"
    launch_id = ack["launch_id"]
    url = f"/runs/{wf}/workstreams/{launch_id}/deadline"

    beyond = problem(await http.post(url, json={"extend_seconds": 600}), 409)
    assert "deadline" in beyond["detail"] and launch_id in beyond["detail"]
    for payload in ({"extend_seconds": 0}, {"extend_seconds": 1801}, {}, {"extend": 5}):
        bad = problem(await http.post(url, json=payload), 422)
        assert "extend" in bad["detail"], bad

    async def listed() -> dict[str, Any] | None:
        found = (await http.get(f"/runs/{wf}/workstreams/{launch_id}")).json()
        return found if found["deadline_seconds"] <= 120 else None

    assert await eventually(listed, what="the child's cut deadline", timeout=WAIT)
    await http.post(f"/runs/{wf}/cancel")
