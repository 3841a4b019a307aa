"""A run that continues as new, seen through the gateway (docs/graphs/long-runs.md).

``GET /runs/{id}`` is polled all through the handovers and never fails; the
Temporal UI link names the workflow, not a run; the bundle holds every
generation's history, and the replay command replays the saved bundle.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import orjson
import pytest
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from spindle.gateway.runs.temporal import TENANT_KEY
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, GraphRunResult
from spindle.worker.replay.replayer import main as replay_main
from tests.e2e.conftest import Caller, SpindleStack
from tests.history_volume import loop_graph

pytestmark = pytest.mark.e2e

ITERATIONS = 60  # 122 node executions: a handful of generations at 100 events each


async def test_describe_link_and_bundle_follow_a_run_across_generations(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], tmp_path: Path
) -> None:
    workflow_id = f"gens-{uuid.uuid4().hex[:10]}"
    tenant = callers["alice"].tenant
    handle = await stack.temporal.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=loop_graph(ITERATIONS),
            input={"text": "one two three"},
            tenant_id=tenant,
            continue_as_new_after_events=100,
        ),
        id=workflow_id,
        task_queue=stack.settings.task_queue,
        result_type=GraphRunResult,
        search_attributes=TypedSearchAttributes([SearchAttributePair(TENANT_KEY, tenant)]),
    )
    first_run_id = handle.first_execution_run_id
    ending = asyncio.ensure_future(handle.result())

    # Polled while the run hands over from generation to generation.
    described: list[httpx.Response] = []
    while not ending.done():
        described.append(await http.get(f"/runs/{workflow_id}"))
    result = await ending
    assert result.generation >= 3
    assert len(described) > result.generation
    assert [r.status_code for r in described if r.status_code != 200] == []
    bodies = [r.json() for r in described]
    assert {b["status"] for b in bodies} <= {"running", "completed"}
    # The run keeps the id the start answered, whatever generation is current.
    assert {b["run_id"] for b in bodies} == {first_run_id}
    assert {b["temporal_ui_url"] for b in bodies} == {
        f"{stack.settings.temporal_ui_url.rstrip('/')}/namespaces/"
        f"{stack.settings.temporal_namespace}/workflows/{workflow_id}"
    }

    reply = await http.get(f"/runs/{workflow_id}/bundle")
    assert reply.status_code == 200, reply.text
    bundle = reply.json()
    generations = bundle["history"]
    assert len(generations) == result.generation
    assert generations[0]["run_id"] == first_run_id
    kinds = [[e["eventType"] for e in g["events"]] for g in generations]
    assert all(k[-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW" for k in kinds[:-1])
    assert kinds[-1][-1] == "EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED"
    scheduled = sum(k.count("EVENT_TYPE_ACTIVITY_TASK_SCHEDULED") for k in kinds)
    assert scheduled >= 2 * (ITERATIONS + 1)  # every node execution of every generation

    saved = tmp_path / "bundle.json"
    saved.write_bytes(orjson.dumps(bundle))
    # ``python -m spindle.worker.replay bundle.json``: every generation replays.
    assert await asyncio.to_thread(replay_main, [str(saved)]) == 0
