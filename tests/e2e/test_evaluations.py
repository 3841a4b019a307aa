"""Evaluations (docs/replay-and-compare.md#evaluations): ``POST /evaluations`` forks each
source run with a candidate (tools recorded), compares, checks, and sums up; it can be
cancelled (its forks with it) and another tenant never sees it."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import SpindleStack, example_graph
from tests.e2e.run_driver import start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.e2e.test_fork import completed_pipeline
from tests.polling import eventually
from tests.recorded_histories import replays_and_is_recorded

pytestmark = pytest.mark.e2e


def stricter_pipeline() -> dict[str, Any]:
    """The pipeline escalating everything not positive (neutral texts too)."""
    spec = copy.deepcopy(example_graph("pipeline"))
    spec["name"] = "pipeline-stricter"
    for edge in spec["edges"]:
        if edge["to"] == "escalation":
            edge["when"] = "mood.label != 'positive'"
        elif edge["to"] == "summary":
            edge["when"] = "mood.label == 'positive'"
    return spec


async def evaluation_ended(
    http: httpx.AsyncClient, evaluation_id: str, statuses: set[str], timeout: float = 60.0
) -> dict[str, Any]:
    async def ended() -> dict[str, Any] | None:
        reply = await http.get(f"/evaluations/{evaluation_id}")
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        return body if body["status"] in statuses else None

    return await eventually(
        ended, what=f"evaluation {evaluation_id} in {statuses}", timeout=timeout
    )


async def test_an_evaluation_of_three_runs_with_two_checks(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    texts = [f"a great happy day {unique}", f"a plain day {unique}", f"a bad slow day {unique}"]
    sources = [await completed_pipeline(http, text) for text in texts]
    ids = [source["workflow_id"] for source in sources]
    reply = await http.post(
        "/evaluations",
        json={
            "source": {"run_ids": ids},
            "candidate": {"graph_spec": stricter_pipeline()},
            "tools": "recorded",
            "llm": "recorded",
            "checks": [
                {
                    "name": "kept_priority",
                    "expr": "source.output.priority == candidate.output.priority",
                },
                {"name": "same_nodes", "expr": "candidate.totals.nodes == source.totals.nodes"},
            ],
            "concurrency": 2,
        },
    )
    assert reply.status_code == 201, reply.text
    started = reply.json()
    assert started["runs"] == 3
    evaluation_id = started["evaluation_id"]

    done = await evaluation_ended(http, evaluation_id, {"completed", "failed", "cancelled"})
    assert done["status"] == "completed", done
    summary = done["summary"]
    assert (summary["same"], summary["changed"], summary["failed"]) == (2, 1, 0), [
        (entry["outcome"], entry["error"]) for entry in done["runs"]
    ]
    assert summary["checks"] == {
        "kept_priority": {"passed": 2, "failed": 1},
        "same_nodes": {"passed": 3, "failed": 0},
    }
    assert summary["source"]["duration_ms"] > 0 and summary["candidate"]["duration_ms"] > 0
    by_source = {entry["source_id"]: entry for entry in done["runs"]}
    assert [entry["source_id"] for entry in done["runs"]] == ids
    plain = by_source[ids[1]]
    assert plain["outcome"] == "changed"
    assert plain["only_source"] == ["summary"] and plain["only_candidate"] == ["escalation"]
    assert plain["checks"]["kept_priority"]["passed"] is False
    # Each fork is a run of its own, with its lineage, comparable with its source.
    fork = await wait_for_status(http, plain["fork_id"], {"completed"})
    assert fork["forked_from"]["workflow_id"] == ids[1]
    assert fork["forked_from"]["tools"] == "recorded"
    assert fork["output"]["priority"] == "high"
    # Its tool nodes answered from the source's records (no tool ran again).
    tools = [m["d"] for m in await updates(http, fork) if "tool" in (m.get("d") or {})]
    assert {d["tool"] for d in tools} == {"extract_keywords", "sentiment"}, tools
    assert all(d.get("recorded") is True for d in tools), tools
    compared = (await http.get(f"/runs/{ids[1]}/compare/{plain['fork_id']}")).json()
    assert compared["output"]["same"] is False

    # Its progress on its own stream: one BATCH_PROGRESS per run, then its end.
    async with open_sse(http, f"/evaluations/{evaluation_id}/stream") as connection:
        assert connection.response.status_code == 200
        messages = [event.json() for event in await connection.read_to_end()]
    progress = [m for m in messages if m["t"] == 13]
    assert len(progress) == 3 and progress[-1]["d"]["done"] == 3, messages
    assert messages[-1]["t"] == 4

    listed = (await http.get("/evaluations")).json()
    assert evaluation_id in [item["evaluation_id"] for item in listed["evaluations"]]

    # Its workflow's history replays; recorded (SPINDLE_RECORD_HISTORIES=1,
    # tests/histories/record.py) as tests/histories/evaluation.json, which the replay
    # tests replay with every later version of the Evaluation workflow.
    await replays_and_is_recorded(stack.temporal, evaluation_id, "evaluation")


async def test_cancelling_an_evaluation_cancels_its_forks(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    # A source waiting at its prompt: its fork waits there too, until cancelled.
    source = await start(http, graph="approval-flow", input={"topic": f"cancel {unique}"})
    await wait_for_status(http, source["workflow_id"], {"paused"})
    reply = await http.post(
        "/evaluations",
        # on_miss live: a source still running may not have its call records archived
        # yet (they go with its messages' batch); this test is about the cancel.
        json={"source": {"run_ids": [source["workflow_id"]]}, "on_miss": "live"},
    )
    assert reply.status_code == 201, reply.text
    evaluation_id = reply.json()["evaluation_id"]

    async def fork_waiting() -> str | None:
        body = (await http.get(f"/evaluations/{evaluation_id}")).json()
        fork_id = body["runs"][0]["fork_id"]
        if fork_id is None:
            return None
        run = (await http.get(f"/runs/{fork_id}")).json()
        assert run["status"] in ("running", "paused"), run.get("error")
        return fork_id if run["status"] == "paused" else None

    fork_id = await eventually(fork_waiting, what="the fork waits at its prompt", timeout=30)
    cancelled = await http.post(f"/evaluations/{evaluation_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    done = await evaluation_ended(http, evaluation_id, {"cancelled", "completed", "failed"})
    assert done["status"] == "cancelled"
    assert done["runs"][0]["outcome"] == "failed"
    assert "cancel" in done["runs"][0]["error"]  # "fork ended canceled: ..."
    await wait_for_status(http, fork_id, {"canceled"})


async def test_another_tenant_is_refused(
    http: httpx.AsyncClient, clients: dict[str, httpx.AsyncClient], examples: list[str], unique: str
) -> None:
    source = await completed_pipeline(http, f"a great day {unique}")
    mallory = clients["mallory"]
    # Another tenant's runs are not sources of hers...
    refused = await mallory.post(
        "/evaluations", json={"source": {"run_ids": [source["workflow_id"]]}}
    )
    assert refused.status_code == 404, refused.text
    assert source["workflow_id"] in refused.json()["detail"]
    # ...and alice's evaluation is not hers to see, stream or cancel.
    reply = await http.post("/evaluations", json={"source": {"run_ids": [source["workflow_id"]]}})
    assert reply.status_code == 201, reply.text
    evaluation_id = reply.json()["evaluation_id"]
    assert (await mallory.get(f"/evaluations/{evaluation_id}")).status_code == 404
    assert (await mallory.post(f"/evaluations/{evaluation_id}/cancel")).status_code == 404
    assert (await mallory.get(f"/evaluations/{evaluation_id}/stream")).status_code == 404
    listed = (await mallory.get("/evaluations")).json()
    assert evaluation_id not in [item["evaluation_id"] for item in listed["evaluations"]]
    # bob (alice's tenant, no roles) sees it but may not cancel it.
    assert (await clients["bob"].get(f"/evaluations/{evaluation_id}")).status_code == 200
    assert (await clients["bob"].post(f"/evaluations/{evaluation_id}/cancel")).status_code == 403
    await evaluation_ended(http, evaluation_id, {"completed"})


async def test_bad_requests_name_what_is_wrong(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    bad_expr = await http.post(
        "/evaluations",
        json={"source": {"graph": "pipeline"}, "checks": [{"name": "x", "expr": "a ==="}]},
    )
    assert bad_expr.status_code == 422 and "checks[0].expr" in bad_expr.text
    too_many = await http.post(
        "/evaluations", json={"source": {"graph": "pipeline"}, "concurrency": 100_000}
    )
    assert too_many.status_code == 422 and "evaluation_max_concurrency" in too_many.text
    nothing = await http.post("/evaluations", json={"source": {"graph": "no-such-graph"}})
    assert nothing.status_code == 422 and "no run matches" in nothing.text


def judge_graph(name: str) -> dict[str, Any]:
    """A scoring graph: passed when both runs gave the same priority."""
    return {
        "name": name,
        "entry": "verdict",
        "nodes": [
            {
                "id": "verdict",
                "type": "output",
                "params": {
                    "select": "{passed: input.source.output.priority == "
                    "input.candidate.output.priority}"
                },
            }
        ],
        "edges": [],
    }


async def test_a_scoring_graph_check_runs_as_a_child_run(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    judge = f"judge-{unique}"
    registered = await http.put(f"/graphs/{judge}", json=judge_graph(judge))
    assert registered.status_code in (200, 201), registered.text
    sources = [
        (await completed_pipeline(http, f"{text} {unique}"))["workflow_id"]
        for text in ("a great happy day", "a plain day")
    ]
    reply = await http.post(
        "/evaluations",
        json={
            "source": {"run_ids": sources},
            "candidate": {"graph_spec": stricter_pipeline()},
            "checks": [{"name": "judge", "graph": judge}],
        },
    )
    assert reply.status_code == 201, reply.text
    done = await evaluation_ended(http, reply.json()["evaluation_id"], {"completed", "failed"})
    assert done["summary"]["checks"] == {"judge": {"passed": 1, "failed": 1}}, done["runs"]
    verdict = done["runs"][1]["checks"]["judge"]
    assert verdict["passed"] is False and verdict["value"] == {"passed": False}
    judged = await wait_for_status(http, verdict["run_id"], {"completed"})
    assert judged["graph_name"] == judge
    assert judged["input"]["source"]["output"]["priority"] == "normal"
    assert judged["input"]["candidate"]["output"]["priority"] == "high"

    unknown = await http.post(
        "/evaluations",
        json={"source": {"run_ids": sources}, "checks": [{"name": "j", "graph": "nope"}]},
    )
    assert unknown.status_code == 422 and "checks[0].graph" in unknown.text


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_an_evaluation_survives_a_worker_crash(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    sources = [
        (await completed_pipeline(http, f"a great happy day {unique} {i}"))["workflow_id"]
        for i in range(6)
    ]
    # on_miss "fail" (the default): no fork may call a tool live, the worker's loss
    # included. The lost worker held the archive queue: the forks that end before
    # another worker drains it are compared once their ends are archived
    # (docs/replay-and-compare.md, "Limits"), never read as "running".
    reply = await http.post("/evaluations", json={"source": {"run_ids": sources}, "concurrency": 2})
    assert reply.status_code == 201, reply.text
    evaluation_id = reply.json()["evaluation_id"]
    try:
        async with open_sse(http, f"/evaluations/{evaluation_id}/stream") as connection:
            await connection.until_type(13)  # the first run done: kill mid-evaluation
            stack.kill_worker()
            await stack.restart_worker()
            events = await connection.read_to_end(timeout=240)
    finally:
        await stack.restart_worker()
    done = await evaluation_ended(http, evaluation_id, {"completed", "failed"}, timeout=60)
    assert done["status"] == "completed"
    outcomes = [(run["outcome"], run.get("error")) for run in done["runs"]]
    assert (done["summary"]["same"], done["summary"]["failed"]) == (6, 0), outcomes
    progress = [event.json() for event in events if event.json()["t"] == 13]
    assert progress[-1]["d"]["done"] == 6
