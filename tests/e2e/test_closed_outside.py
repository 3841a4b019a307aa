"""Runs Temporal closes without Spindle's routes are noticed: stream, describe, document.

Terminated with the ``temporal`` CLI, cancelled from a Temporal client, or past
an execution timeout: the run's open SSE stream ends with the closing message
and its reason, and ``GET /runs/{id}`` and the run document say why
(docs/design.md §10, rule 3). A run nobody looks at is found by the sweep.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from spindle.gateway.runs.temporal import GRAPH_KEY, TENANT_KEY
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput
from spindle.shared.platform import metrics
from spindle.shared.store.archive import RunArchive, RunRecord
from spindle.shared.temporal.closed_runs import ClosedRunSweep
from tests.e2e.conftest import Caller, SpindleStack, example_graph
from tests.e2e.run_driver import T, start, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

TEMPORAL_CLI = Path(sys.executable).parent / "temporal"


async def archived(stack: SpindleStack, workflow_id: str) -> RunRecord | None:
    archive = RunArchive.from_settings(stack.settings)
    try:
        return await archive.get_run(workflow_id)
    finally:
        await archive.close()


async def test_a_run_terminated_with_the_temporal_cli_ends_its_stream(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": f"cli {unique}"})
    reason = f"operator stopped it {unique}"
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)
        cli = await asyncio.create_subprocess_exec(
            str(TEMPORAL_CLI),
            "workflow",
            "terminate",
            "--address",
            stack.settings.temporal_address,
            "--namespace",
            stack.settings.temporal_namespace,
            "--workflow-id",
            run["workflow_id"],
            "--reason",
            reason,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        output, _ = await cli.communicate()
        assert cli.returncode == 0, output.decode()
        # Nobody calls GET /runs here: the stream's own check must end it.
        await sse.read_to_end(timeout=30)
        assert sse.ended
    last = sse.events[-1].json()
    assert last["t"] == T.TERMINATED
    assert reason in last["m"]
    assert last["d"]["status"] == "terminated"

    described = (await http.get(f"/runs/{run['workflow_id']}")).json()
    assert described["status"] == "terminated"
    assert reason in described["error"]
    assert described["history"]["events"] > 0
    assert described["history"]["bytes"] > 0
    record = await archived(stack, run["workflow_id"])
    assert record is not None
    assert record.status == "terminated"
    assert record.error is not None and reason in record.error
    # Exactly one closing message, however many times it was looked at.
    await http.get(f"/runs/{run['workflow_id']}")
    stored = (await http.get(f"/runs/{run['workflow_id']}/{run['run_id']}/updates")).json()
    assert [m["t"] for m in stored["messages"]].count(T.TERMINATED) == 1


async def test_a_run_cancelled_from_a_temporal_client_says_why(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": f"cancel {unique}"})
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)
        handle = stack.temporal.get_workflow_handle(run["workflow_id"])
        await handle.cancel(reason=f"no longer needed {unique}")
        await sse.read_to_end(timeout=30)
        assert sse.ended
    assert sse.events[-1].json()["t"] == T.TERMINATED

    done = await wait_for_status(http, run["workflow_id"], {"CANCELED"}, field="temporal_status")
    assert done["status"] == "canceled"
    assert f"no longer needed {unique}" in done["error"]

    async def reason_recorded() -> RunRecord | None:
        record = await archived(stack, run["workflow_id"])
        return record if record is not None and record.error else None

    record = await eventually(reason_recorded, what="the document's error", timeout=10)
    assert record.status == "canceled"
    assert f"no longer needed {unique}" in (record.error or "")


async def test_a_run_past_its_execution_timeout_is_timed_out_with_a_reason(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    alice = callers["alice"]
    spec = GraphSpec.model_validate(example_graph("approval-flow"))
    workflow_id = f"run-timeout-{unique}"
    handle = await stack.temporal.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=spec, input={"topic": "too slow"}, tenant_id=alice.tenant, user_id=alice.user
        ),
        id=workflow_id,
        task_queue=stack.settings.task_queue,
        execution_timeout=timedelta(seconds=3),
        search_attributes=TypedSearchAttributes(
            [
                SearchAttributePair(TENANT_KEY, alice.tenant),
                SearchAttributePair(GRAPH_KEY, spec.name),
            ]
        ),
    )
    run_id = handle.result_run_id or ""

    async def waiting_for_review() -> dict[str, Any] | None:
        reply = await http.get(f"/runs/{workflow_id}")
        return reply.json() if reply.status_code == 200 and reply.json()["pending_input"] else None

    await eventually(waiting_for_review, what="the prompt", timeout=30, interval=0.1)
    async with open_sse(http, f"/runs/{workflow_id}/{run_id}/stream") as sse:
        assert sse.response.status_code == 200
        await sse.read_to_end(timeout=40)
        assert sse.ended
    last = sse.events[-1].json()
    assert last["t"] == T.TERMINATED
    assert last["d"]["status"] == "timed_out"
    assert "execution timeout" in last["m"]

    described = (await http.get(f"/runs/{workflow_id}")).json()
    assert described["status"] == "timed_out"
    assert "3s execution timeout" in described["error"]
    record = await archived(stack, workflow_id)
    assert record is not None
    assert record.status == "timed_out"
    assert record.error == described["error"]


async def test_the_sweep_ends_a_closed_run_nobody_watches_and_gauges_open_histories(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    closed = await start(http, graph="approval-flow", input={"topic": f"unwatched {unique}"})
    still_open = await start(http, graph="approval-flow", input={"topic": f"open {unique}"})
    for run in (closed, still_open):
        await wait_for_status(http, run["workflow_id"], {"paused"})
    await stack.temporal.get_workflow_handle(closed["workflow_id"]).terminate(
        reason=f"limit reached {unique}"
    )
    open_events = (await http.get(f"/runs/{still_open['workflow_id']}")).json()["history"]
    bus = MessageBus.from_settings(stack.settings)
    archive = RunArchive.from_settings(stack.settings)
    try:
        sweep = ClosedRunSweep(
            temporal=stack.temporal, bus=bus, archive=archive, interval=60, batch=10_000
        )

        async def swept() -> Any:
            # Temporal's visibility lists a terminated run a moment after the
            # terminate returns (more under load): sweep until it is seen.
            await sweep.sweep_once()
            found = await archive.get_run(closed["workflow_id"])
            return found if found is not None and found.status == "terminated" else None

        record = await eventually(swept, what="the sweep ends the closed run", timeout=30)
    finally:
        await bus.close()
        await archive.close()
    assert record is not None
    assert record.status == "terminated"
    assert f"limit reached {unique}" in (record.error or "")
    stored = (await http.get(f"/runs/{closed['workflow_id']}/{closed['run_id']}/updates")).json()
    last = stored["messages"][-1]
    assert last["t"] == T.TERMINATED
    assert f"limit reached {unique}" in last["m"]
    assert metrics.RUN_HISTORY_EVENTS_MAX._value.get() >= open_events["events"]
    assert metrics.RUN_HISTORY_BYTES_MAX._value.get() >= open_events["bytes"]
