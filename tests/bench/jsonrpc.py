"""The JSON-RPC section: ``tasks.*`` request rates and a task tree against a graph run.

One worker process and one gateway process of their own, on the benchmark's
servers (auth off, so the figures are the task path, not key checks).

- **Requests per second**: ``tasks.create`` and ``tasks.get`` over HTTP with
  ``concurrency`` requests in flight. Floor: ``GET /healthz`` (a gateway round
  trip that does no I/O) at the same concurrency, in the same run.
- **Tree against graph**: ``tasks.execute`` of a 20-task tree (a binary tree of
  ``tool`` tasks: each depends on its parent) until its root task is
  completed, against ``POST /runs`` of the same 20 nodes as one graph until the
  run is completed; both polled over HTTP every 20 ms, median of ``repeat``.

Nothing is asserted about times; the section fails only on its deadline.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from temporalio.client import Client

from tests.bench.stack import BenchStack
from tests.polling import eventually

TASK_QUEUE = "bench-jsonrpc"
TREE_SIZE = 20
POLL_S = 0.02


async def _rate(
    call: Callable[[httpx.AsyncClient, int], Awaitable[None]],
    http: httpx.AsyncClient,
    requests: int,
    concurrency: int,
) -> float:
    """Requests per second of ``call`` with ``concurrency`` in flight."""
    counter = iter(range(requests))

    async def lane() -> None:
        for index in counter:
            await call(http, index)

    started = time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return requests / (time.perf_counter() - started)


async def _rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
    reply = await http.post(
        "/", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    body = reply.json()
    if "error" in body:
        raise RuntimeError(f"{method}: {body['error']}")
    return body["result"]


def _tool(name: str, depends_on: str | None) -> dict[str, Any]:
    task: dict[str, Any] = {
        "id": name,
        "name": name,
        "schemas": {"method": "tool"},
        "params": {"tool": "word_count"},
        "inputs": {"text": f"task {name} counts these words"},
    }
    if depends_on is not None:
        task["dependencies"] = [{"id": depends_on}]
    return task


def tree_tasks() -> list[dict[str, Any]]:
    """A binary tree of ``TREE_SIZE`` tool tasks: ``t<i>`` depends on ``t<(i-1)//2>``."""
    return [_tool(f"t{i}", None if i == 0 else f"t{(i - 1) // 2}") for i in range(TREE_SIZE)]


def tree_graph() -> dict[str, Any]:
    """The same 20 nodes and edges as one graph spec."""
    nodes = [
        {
            "id": f"t{i}",
            "type": "tool",
            "params": {"tool": "word_count", "args": {"text": f"task t{i} counts these words"}},
        }
        for i in range(TREE_SIZE)
    ]
    edges = [{"from": f"t{(i - 1) // 2}", "to": f"t{i}"} for i in range(1, TREE_SIZE)]
    return {
        "name": f"bench-tree-{uuid.uuid4().hex[:6]}",
        "entry": "t0",
        "nodes": nodes,
        "edges": edges,
    }


async def _until(probe: Callable[[], Awaitable[bool]], limit_s: float) -> None:
    # The same poll interval for both measurements, so it cancels out of the ratio.
    await eventually(probe, what="the run finishes", timeout=limit_s, interval=POLL_S)


async def _tree_seconds(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    result = await _rpc(http, "tasks.execute", {"tasks": tree_tasks()})
    root = result["root_task_id"]

    async def done() -> bool:
        task = await _rpc(http, "tasks.get", {"task_id": root})
        if task["status"] in ("failed", "cancelled"):
            raise RuntimeError(f"task tree ended {task['status']}: {task.get('error')}")
        return bool(task["status"] == "completed")

    await _until(done, 60)
    return time.perf_counter() - started


async def _graph_seconds(http: httpx.AsyncClient) -> float:
    started = time.perf_counter()
    reply = await http.post("/runs", json={"graph_spec": tree_graph()})
    reply.raise_for_status()
    workflow_id = reply.json()["workflow_id"]

    async def done() -> bool:
        run = (await http.get(f"/runs/{workflow_id}")).json()
        if run["status"] in ("failed", "canceled", "terminated"):
            raise RuntimeError(f"graph run ended {run['status']}")
        return bool(run["status"] == "completed")

    await _until(done, 60)
    return time.perf_counter() - started


async def bench_jsonrpc(
    stack: BenchStack,
    client: Client,
    *,
    requests: int = 400,
    concurrency: int = 16,
    repeat: int = 3,
    budget_s: float = 120.0,
) -> dict[str, Any]:
    """The section's figures (see the module docstring)."""
    section_started = time.perf_counter()
    await stack.worker("rpc-worker", client, task_queue=TASK_QUEUE)
    _, base = stack.gateway("rpc-gateway", task_queue=TASK_QUEUE)
    async with asyncio.timeout(budget_s), httpx.AsyncClient(base_url=base, timeout=30) as http:
        created: list[str] = []

        async def healthz(h: httpx.AsyncClient, _: int) -> None:
            (await h.get("/healthz")).raise_for_status()

        async def create(h: httpx.AsyncClient, index: int) -> None:
            task = await _rpc(h, "tasks.create", {"name": f"bench {index}", "priority": index % 4})
            created.append(task["id"])

        async def get(h: httpx.AsyncClient, index: int) -> None:
            await _rpc(h, "tasks.get", {"task_id": created[index % len(created)]})

        floor_rps = await _rate(healthz, http, requests, concurrency)
        create_rps = await _rate(create, http, requests, concurrency)
        get_rps = await _rate(get, http, requests, concurrency)

        await _tree_seconds(http)  # warm-up: first task run, first graph run
        await _graph_seconds(http)
        tree = [await _tree_seconds(http) for _ in range(repeat)]
        graph = [await _graph_seconds(http) for _ in range(repeat)]
    tree_ms = statistics.median(tree) * 1000
    graph_ms = statistics.median(graph) * 1000
    return {
        "requests": requests,
        "concurrency": concurrency,
        "healthz_rps_floor": round(floor_rps, 1),
        "tasks_create_rps": round(create_rps, 1),
        "tasks_get_rps": round(get_rps, 1),
        "create_ratio_to_floor": round(floor_rps / create_rps, 2),
        "get_ratio_to_floor": round(floor_rps / get_rps, 2),
        "tree_tasks": TREE_SIZE,
        "tasks_execute_tree_ms": round(tree_ms, 1),
        "graph_run_same_nodes_ms": round(graph_ms, 1),
        "tree_to_graph_ratio": round(tree_ms / graph_ms, 2),
        "section_wall_s": round(time.perf_counter() - section_started, 1),
    }
