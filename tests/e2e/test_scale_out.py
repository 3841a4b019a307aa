"""Scale out: two worker processes and two gateway processes (ports apart) on one
Temporal dev server, one Redis and one MongoDB wire server, auth on.

- runs started through either gateway spread over both workers (Temporal's
  history names the worker that ran each activity, ``<pid>@<host>``);
- a run started through gateway A is watched through gateway B, answered through
  A, and B's stream shows the answer and the rest of the run;
- the worker holding a run and the gateway a client streams from are SIGKILLed
  while the run waits: the other worker finishes the run, and the client that
  resumes on the other gateway with ``Last-Event-ID`` has every message once;
- a third worker, ``spindle worker --task-queue <queue>``, runs exactly the agent
  node's activities of a graph that routes ``agent`` to that queue;
- a ``task_queues`` entry naming an unknown node type is refused with a 422.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from spindle.dev.processes import ManagedProcess, bin_path, free_port, python_module
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import (
    REPO_ROOT,
    Caller,
    example_graph,
    start_gateway,
    subprocess_env,
    wait_for_worker,
)
from tests.e2e.run_driver import T, answer, assert_contiguous, start, updates, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.faults.conftest import read_until_dropped, resume_to_end
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(300)]

# A run whose sticky worker died moves on after its activities' start-to-close
# timeout at worst: keep it short.
NODE_TIMEOUT_SECONDS = 3
MAX_SPREAD_BATCHES = 10


@dataclass
class ScaleOut:
    """The worker and gateway processes and an HTTP client of each gateway."""

    settings: Settings
    temporal: Client
    workers: list[ManagedProcess]
    gateways: list[ManagedProcess]
    http: list[httpx.AsyncClient]

    def identities(self) -> dict[str, int]:
        """The Temporal identity prefix (``<pid>@``) of each live worker → its index."""
        return {f"{w.pid}@": i for i, w in enumerate(self.workers) if w.alive()}

    async def start_worker(self, index: int) -> None:
        worker = self.workers[index]
        worker.start()
        assert worker.pid is not None
        await wait_for_worker(self.temporal, self.settings.task_queue, worker.pid, worker)


@pytest.fixture(scope="module")
async def scale_out(
    e2e_settings: Settings,
    temporal_client: Client,
    artifacts_dir: Path,
    callers: dict[str, Caller],
) -> AsyncIterator[ScaleOut]:
    settings = e2e_settings.model_copy(update={"task_queue": f"scale-{uuid.uuid4().hex[:8]}"})
    logs = artifacts_dir / "scale-out"
    workers = [
        ManagedProcess(
            f"worker-{n}",
            python_module("spindle.worker.main"),
            log_path=logs / f"worker-{n}.log",
            env=subprocess_env(settings),
            cwd=REPO_ROOT,
        )
        for n in (1, 2)
    ]
    gateways: list[ManagedProcess] = []
    clients: list[httpx.AsyncClient] = []
    running = ScaleOut(settings, temporal_client, workers, gateways, clients)
    try:
        # The workers import and connect while the gateways start (each blocks until
        # it is healthy); then each worker is waited for until it polls.
        for worker in workers:
            worker.start()
        for name in ("a", "b"):
            port = free_port()
            gateway_settings = settings.model_copy(update={"gateway_port": port})
            gateways.append(start_gateway(gateway_settings, f"gateway-{name}", logs))
            clients.append(
                httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}",
                    headers=callers["sam"].headers,
                    timeout=httpx.Timeout(30.0, connect=5.0),
                )
            )
        for worker in workers:
            assert worker.pid is not None
            await wait_for_worker(temporal_client, settings.task_queue, worker.pid, worker)
        yield running
    finally:
        for client in clients:
            await client.aclose()
        for proc in [*gateways, *workers]:
            proc.stop()
        # Runs left open on this queue have no worker any more; end them so the
        # tenant's later tests (schemathesis walks every run it lists) meet none.
        await terminate_open_runs(temporal_client, settings.task_queue)


async def terminate_open_runs(temporal: Client, task_queue: str) -> None:
    query = f'TaskQueue = "{task_queue}" AND ExecutionStatus = "Running"'
    async for execution in temporal.list_workflows(query):
        with contextlib.suppress(RPCError):
            await temporal.get_workflow_handle(execution.id).terminate("scale-out test ended")


async def register(http: httpx.AsyncClient, example: str, **node_fields: Any) -> str:
    """PUT an example graph under a unique name (through one gateway); its name."""
    spec = {**example_graph(example), "name": f"{example}-{uuid.uuid4().hex[:8]}"}
    spec["nodes"] = [{**node, **node_fields} for node in spec["nodes"]]
    reply = await http.put(f"/graphs/{spec['name']}", json=spec)
    assert reply.status_code in (200, 201), reply.text
    return str(spec["name"])


def on_any_gateway(url: str) -> str:
    """A gateway URL without its scheme and host (kept: path and query), so any
    gateway's client can follow it."""
    return httpx.URL(url).raw_path.decode()


async def history(temporal: Client, workflow_id: str) -> list[Any]:
    return [e async for e in temporal.get_workflow_handle(workflow_id).fetch_history_events()]


def activity_runners(events: list[Any], identities: dict[str, int]) -> list[int]:
    """The worker (index) that started each activity attempt of a history."""
    return [
        index
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        for prefix, index in identities.items()
        if e.activity_task_started_event_attributes.identity.startswith(prefix)
    ]


async def test_runs_spread_across_both_workers(scale_out: ScaleOut) -> None:
    graph = await register(scale_out.http[0], "pipeline")
    identities = scale_out.identities()
    ran: Counter[int] = Counter()
    for batch in range(MAX_SPREAD_BATCHES):
        # Four at once, alternately through each gateway: the graph registered
        # through A is known to B (MongoDB holds it).
        runs = await asyncio.gather(
            *(
                start(scale_out.http[i % 2], graph=graph, input={"text": f"batch {batch} run {i}"})
                for i in range(4)
            )
        )
        for i, run in enumerate(runs):
            other = scale_out.http[(i + 1) % 2]
            done = await wait_for_status(
                other, run["workflow_id"], {"COMPLETED"}, timeout=60, field="temporal_status"
            )
            assert done["status"] == "completed" and done["output"]["keywords"], done
            ran.update(
                activity_runners(await history(scale_out.temporal, run["workflow_id"]), identities)
            )
        if len(ran) == 2:
            break
    assert set(ran) == {0, 1}, f"activities per worker: {dict(ran)}"


async def test_answer_through_one_gateway_reaches_a_stream_on_the_other(
    scale_out: ScaleOut,
) -> None:
    a, b = scale_out.http
    graph = await register(a, "approval-flow")
    run = await start(a, graph=graph, input={"topic": "two gateways"})
    async with open_sse(b, on_any_gateway(run["stream_url"])) as sse:
        assert sse.response.status_code == 200, await sse.response.aread()
        await sse.until_type(T.REQUEST_INPUT)
        reply = await answer(a, run, {"data": {"decision": "approve"}, "client_message_id": "x"})
        assert reply.status_code == 200, reply.text
        question = await sse.until_type(T.QUESTION)
        assert question.json()["d"]["client_message_id"] == "x"
        await sse.read_to_end(timeout=60)
        assert sse.ended
    streamed = [e.json() for e in sse.events]
    assert_contiguous(sse.events)
    assert streamed[-1]["t"] == T.COMPLETE
    # Either gateway serves the same history.
    assert streamed == await updates(a, run) == await updates(b, run)


async def test_a_worker_and_a_gateway_killed_mid_run_lose_nothing(scale_out: ScaleOut) -> None:
    a, b = scale_out.http
    graph = await register(a, "approval-flow", timeout_seconds=NODE_TIMEOUT_SECONDS)
    run = await start(a, graph=graph, input={"topic": "failover"})
    workflow_id = run["workflow_id"]
    identities = scale_out.identities()
    try:
        async with open_sse(a, on_any_gateway(run["stream_url"])) as sse:
            assert sse.response.status_code == 200
            await sse.until_type(T.REQUEST_INPUT)
            # The run now waits on its prompt, cached on the worker that ran its
            # last workflow task: that is the one to kill.
            holder: int = await eventually(
                lambda: sticky_holder(scale_out.temporal, workflow_id, identities),
                what="the prompt's activity completed and its workflow task ran",
                timeout=30,
                interval=0.05,
            )
            killed = holder - 1
            survivor = 1 - killed
            scale_out.workers[killed].kill()
            scale_out.gateways[0].kill()
            await read_until_dropped(sse, timeout=10)
        seen = [*sse.events]
        events_before = len(await history(scale_out.temporal, workflow_id))

        # The answer waits for the run's next workflow task, which Temporal hands to
        # the survivor once the dead worker's sticky queue times out; a gateway that
        # gives up first answers 503 with Retry-After, and the client retries (the
        # client_message_id makes the retry the same update).
        await eventually(
            lambda: answered(b, run, {"data": {"decision": "approve"}, "client_message_id": "k"}),
            what="the answer accepted through gateway B",
            timeout=60,
            interval=0.5,
        )
        seen += await resume_to_end(b, on_any_gateway(run["stream_url"]), seen[-1].id or "")
        done = await wait_for_status(b, workflow_id, {"completed"}, timeout=60)
    finally:
        await restart_killed(scale_out)

    assert done["output"]["decision"] == "approve"
    assert_contiguous(seen)
    messages = [e.json() for e in seen]
    assert messages == await updates(b, run)
    kinds = Counter(m["t"] for m in messages)
    assert kinds[T.REQUEST_INPUT] == kinds[T.QUESTION] == kinds[T.COMPLETE] == 1
    assert messages[-1]["t"] == T.COMPLETE
    # Every node after the kill ran on the surviving worker.
    after = (await history(scale_out.temporal, workflow_id))[events_before:]
    assert set(activity_runners(after, identities)) == {survivor}


async def test_a_mapping_of_an_unknown_node_type_is_refused_naming_it(
    scale_out: ScaleOut,
) -> None:
    spec = {**example_graph("pipeline"), "name": f"routed-{uuid.uuid4().hex[:8]}"}
    spec["task_queues"] = {"tool": "tools", "summariser": "llm"}
    reply = await scale_out.http[1].post("/runs", json={"graph_spec": spec, "input": {"text": "x"}})
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    problem = reply.json()
    assert "unknown node type 'summariser'" in problem["detail"]
    assert [e["field"] for e in problem["errors"]] == ["task_queues.summariser"]


async def test_a_worker_started_with_task_queue_runs_the_nodes_routed_to_it(
    scale_out: ScaleOut, artifacts_dir: Path
) -> None:
    queue = f"{scale_out.settings.task_queue}-llm"
    routed = ManagedProcess(
        "routed worker",
        [bin_path("spindle"), "worker", "--task-queue", queue],
        log_path=artifacts_dir / "scale-out" / "worker-routed.log",
        env=subprocess_env(scale_out.settings),
        cwd=REPO_ROOT,
    )
    routed.start()
    try:
        assert routed.pid is not None
        await wait_for_worker(scale_out.temporal, queue, routed.pid, routed, activities_only=True)
        spec = {**example_graph("research-agent"), "name": f"routed-{uuid.uuid4().hex[:8]}"}
        spec["task_queues"] = {"agent": queue}
        run = await start(
            scale_out.http[1], graph_spec=spec, input={"question": "What is 45 * 12?"}
        )
        done = await wait_for_status(
            scale_out.http[0],
            run["workflow_id"],
            {"COMPLETED"},
            timeout=60,
            field="temporal_status",
        )
        assert "540" in done["output"]
        events = await history(scale_out.temporal, run["workflow_id"])
    finally:
        routed.stop()
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    ran = {
        scheduled[e.activity_task_started_event_attributes.scheduled_event_id].activity_id: (
            e.activity_task_started_event_attributes.identity.split("@")[0]
        )
        for e in events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    }
    agent = {a.activity_id for a in scheduled.values() if a.task_queue.name == queue}
    # Every LLM turn and tool call of the agent node, and nothing else, ran on the
    # routed worker; the run itself stayed with the main-queue workers.
    assert agent == {i for i in ran if i.startswith("researcher.")} and agent
    assert {ran[i] for i in agent} == {str(routed.pid)}
    assert str(routed.pid) not in {pid for i, pid in ran.items() if i not in agent}


async def answered(http: httpx.AsyncClient, run: dict[str, Any], payload: dict[str, Any]) -> bool:
    """Send an answer; False on 503 (try again), True once accepted."""
    reply = await answer(http, run, payload)
    if reply.status_code == 503:
        return False
    assert reply.status_code == 200, reply.text
    return True


async def sticky_holder(temporal: Client, workflow_id: str, identities: dict[str, int]) -> int:
    """1 + the index of the worker that ran the last workflow task, once the run
    is idle (its last event a completed workflow task after the prompt's
    activity completed); 0 before that."""
    events = await history(temporal, workflow_id)
    asked = any(e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED for e in events[-4:])
    if not asked or events[-1].event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        return 0
    started = [e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED]
    identity = started[-1].workflow_task_started_event_attributes.identity
    return next(index + 1 for prefix, index in identities.items() if identity.startswith(prefix))


async def restart_killed(scale_out: ScaleOut) -> None:
    """Bring back what a test killed, so the module's stack stays whole."""
    for index, worker in enumerate(scale_out.workers):
        if not worker.alive():
            await scale_out.start_worker(index)
    for gateway in scale_out.gateways:
        if not gateway.alive():
            gateway.start(wait=False)
            await asyncio.to_thread(gateway.wait_ready)
