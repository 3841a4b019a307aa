"""``tasks.execute`` / ``tasks.cancel`` over HTTP: a task tree runs as a graph run.

Real gateway, worker, Temporal dev server, Redis and Mongo wire server. Trees
use the built-in ``tool`` executor (``word_count``, ``calculator``) and the
``prompt`` executor (a task that waits for a human) for cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import orjson
import pytest

from tests.callback_receiver import callback_receiver
from tests.e2e.conftest import Caller, SpindleStack, client_for
from tests.polling import eventually

pytestmark = pytest.mark.e2e

TERMINAL = {"completed", "failed", "cancelled"}


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any], **extra: Any) -> Any:
    reply = await http.post(
        "/", json={"jsonrpc": "2.0", "id": "t-1", "method": method, "params": params, **extra}
    )
    body = reply.json()
    assert "error" not in body, body
    return body["result"]


async def rpc_error(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
    reply = await http.post(
        "/", json={"jsonrpc": "2.0", "id": "t-2", "method": method, "params": params}
    )
    body = reply.json()
    assert "result" not in body, body
    return body["error"]


def counting(ref: str, text: str, *, deps: list[str] | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "id": ref,
        "name": ref,
        "parent_id": "root",
        "schemas": {"method": "tool"},
        "params": {"tool": "word_count"},
        "inputs": {"text": text},
        "dependencies": deps or [],
        **kw,
    }


def calculating(ref: str, expression: str, *, deps: list[str]) -> dict[str, Any]:
    return {
        "id": ref,
        "name": ref,
        "parent_id": "root",
        "schemas": {"method": "tool"},
        "params": {"tool": "calculator"},
        "inputs": {"expression": expression},
        "dependencies": deps,
    }


ROOT = {"id": "root", "name": "report"}


def chain_tree() -> list[dict[str, Any]]:
    """root ⊃ {a; b after a; c after a and b}."""
    return [
        ROOT,
        counting("a", "one two three"),
        counting("b", "four five", deps=["a"]),
        calculating("c", "6 * 7", deps=["a", "b"]),
    ]


async def task_ids_by_name(http: httpx.AsyncClient, root_id: str) -> dict[str, str]:
    tree = await rpc(http, "tasks.tree", {"task_id": root_id})
    out: dict[str, str] = {}

    def walk(node: dict[str, Any]) -> None:
        out[node["task"]["name"]] = node["task"]["id"]
        for child in node["children"]:
            walk(child)

    walk(tree)
    return out


async def settled(http: httpx.AsyncClient, task_id: str, stack: SpindleStack) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        task: dict[str, Any] = await rpc(http, "tasks.get", {"task_id": task_id})
        return task if task["status"] in TERMINAL else None

    return await eventually(
        probe, what=f"task {task_id} ends", timeout=30, interval=0.05, alive=stack.worker.alive
    )


async def test_a_tree_runs_by_its_dependencies_and_every_task_gets_its_result(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    summary = {
        "id": "summary",
        "name": "summary",
        "parent_id": "root",
        "schemas": {"method": "agent"},
        "inputs": {"prompt": "Summarize the counts."},
        "dependencies": ["c"],
    }
    started = await rpc(http, "tasks.execute", {"tasks": [*chain_tree(), summary]})
    assert started["status"] == "started"
    root_id = started["root_task_id"]

    root = await settled(http, root_id, stack)
    ids = await task_ids_by_name(http, root_id)
    tasks = {name: await rpc(http, "tasks.get", {"task_id": tid}) for name, tid in ids.items()}
    assert root["status"] == "completed" and root["progress"] == 1.0
    assert tasks["a"]["result"] == {"words": 3, "characters": 13, "sentences": 1}
    assert tasks["b"]["result"]["words"] == 2
    assert tasks["c"]["result"] == 42
    assert isinstance(tasks["summary"]["result"], str) and tasks["summary"]["result"]
    assert all(t["status"] == "completed" and t["progress"] == 1.0 for t in tasks.values())
    assert all(t["workflow_id"] == started["workflow_id"] for t in tasks.values())
    # A grouping root's result is its tree's results by task id.
    assert root["result"][ids["c"]] == 42

    again = await rpc_error(http, "tasks.execute", {"task_id": root_id})
    assert again["code"] == -32000  # a finished tree is copied, not re-run


async def test_a_failing_task_fails_with_its_error_and_its_dependents_never_run(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    tree = [
        ROOT,
        counting("ok", "fine words"),
        calculating("bad", "1 / 0", deps=["ok"]),
        counting("after", "never counted", deps=["bad"]),
    ]
    started = await rpc(http, "tasks.execute", {"tasks": tree})
    root = await settled(http, started["root_task_id"], stack)
    ids = await task_ids_by_name(http, started["root_task_id"])

    bad = await rpc(http, "tasks.get", {"task_id": ids["bad"]})
    after = await rpc(http, "tasks.get", {"task_id": ids["after"]})
    ok = await rpc(http, "tasks.get", {"task_id": ids["ok"]})
    assert root["status"] == "failed" and "division by zero" in root["error"]
    assert bad["status"] == "failed" and "division by zero" in bad["error"]
    assert ok["status"] == "completed"
    assert after["status"] == "cancelled" and after["result"] is None


async def test_validation_errors_use_the_seed_codes(http: httpx.AsyncClient) -> None:
    unknown = await rpc_error(
        http, "tasks.execute", {"tasks": [{"name": "x", "schemas": {"method": "nope"}}]}
    )
    assert unknown["code"] == -32003
    cycle = await rpc_error(
        http,
        "tasks.execute",
        {"tasks": [ROOT, counting("a", "x", deps=["b"]), counting("b", "y", deps=["a"])]},
    )
    assert cycle["code"] == -32002
    missing = await rpc_error(
        http, "tasks.execute", {"task_id": "00000000-0000-4000-8000-000000000000"}
    )
    assert missing["code"] == -32001


async def test_cancel_stops_a_running_tree(http: httpx.AsyncClient, stack: SpindleStack) -> None:
    tree = [
        ROOT,
        {
            "id": "ask",
            "name": "ask",
            "parent_id": "root",
            "schemas": {"method": "prompt"},
            "inputs": {"prompt": "Approve?"},
        },
        counting("then", "after approval", deps=["ask"]),
    ]
    started = await rpc(http, "tasks.execute", {"tasks": tree})
    root_id = started["root_task_id"]
    ids = await task_ids_by_name(http, root_id)

    async def asking() -> bool:
        task = await rpc(http, "tasks.get", {"task_id": ids["ask"]})
        return bool(task["status"] == "in_progress")

    await eventually(asking, what="the prompt task waits", timeout=30, alive=stack.worker.alive)
    cancelled = await rpc(http, "tasks.cancel", {"task_id": root_id})
    assert cancelled == {"task_id": root_id, "status": "cancelled"}
    for name in ("root", "ask", "then"):
        task = await rpc(http, "tasks.get", {"task_id": ids.get(name, root_id)})
        assert task["status"] == "cancelled", (name, task)

    async def run_canceled() -> bool:
        reply = await http.get(f"/runs/{started['workflow_id']}")
        return reply.status_code == 200 and reply.json().get("status") == "canceled"

    await eventually(run_canceled, what="the run is cancelled", timeout=30, interval=0.05)
    # Its run ended: a late node outcome never overwrote the cancel.
    ask = await rpc(http, "tasks.get", {"task_id": ids["ask"]})
    assert ask["status"] == "cancelled"


async def test_terminating_a_tree_run_over_rest_settles_its_tasks(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    tree = [
        ROOT,
        {
            "id": "ask",
            "name": "ask",
            "parent_id": "root",
            "schemas": {"method": "prompt"},
            "inputs": {"prompt": "Approve?"},
        },
    ]
    started = await rpc(http, "tasks.execute", {"tasks": tree})
    ids = await task_ids_by_name(http, started["root_task_id"])

    async def asking() -> bool:
        task = await rpc(http, "tasks.get", {"task_id": ids["ask"]})
        return bool(task["status"] == "in_progress")

    await eventually(asking, what="the prompt task waits", timeout=30, alive=stack.worker.alive)
    reply = await http.post(f"/runs/{started['workflow_id']}/terminate", json={"reason": "stop"})
    assert reply.status_code == 202, reply.text
    # A terminated workflow runs no more code: the gateway settles its tasks.
    for name in ("root", "ask"):
        task = await rpc(http, "tasks.get", {"task_id": ids.get(name, started["root_task_id"])})
        assert task["status"] == "cancelled", (name, task)


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    name, data = "", ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data = line[len("data: ") :]
        elif line == "" and name:
            yield name, orjson.loads(data)
            name, data = "", ""


async def test_streaming_execute_answers_with_the_events_in_order(
    http: httpx.AsyncClient,
) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": "s-1",
        "method": "tasks.execute",
        "params": {"tasks": chain_tree(), "use_streaming": True},
        "metadata": {"stream": True},
    }
    events: list[tuple[str, dict[str, Any]]] = []
    async with asyncio.timeout(30), http.stream("POST", "/", json=request) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for event in sse_events(response):
            events.append(event)

    root_id = events[0][1]["root_task_id"]
    ids = await task_ids_by_name(http, root_id)
    assert events[0] == (
        "task_status_update",
        {
            "protocol": "a2a",
            "task_id": root_id,
            "status": "in_progress",
            "progress": 0.0,
            "root_task_id": root_id,
        },
    )
    assert all(d["protocol"] == "a2a" and d["root_task_id"] == root_id for _, d in events)
    completed = [d["task_id"] for name, d in events if name == "task_completed"]
    assert completed == [ids["a"], ids["b"], ids["c"], root_id]
    last_name, last = events[-1]
    assert (last_name, last["task_id"], last["progress"]) == ("task_completed", root_id, 1.0)
    progress = [d["progress"] for name, d in events if name == "task_progress_update"]
    assert progress == sorted(progress) and progress[-1] < 1.0
    starts = [d["task_id"] for name, d in events if name == "task_status_update"]
    assert set(starts) == {root_id, ids["a"], ids["b"], ids["c"]}


async def test_push_notifications_reach_the_callback_even_after_it_failed(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    async with callback_receiver(lambda n: 500 if n == 0 else 200) as receiver:
        config = {"url": receiver.url, "headers": {"Authorization": "Bearer push-secret"}}
        started = await rpc(
            http,
            "tasks.execute",
            {"tasks": chain_tree()},
            configuration={"push_notification_config": config},
        )
        root_id = started["root_task_id"]

        def root_done() -> bool:
            return any(
                b["task_id"] == root_id and b["status"] == "completed" for b in receiver.accepted()
            )

        await eventually(root_done, what="the last update is pushed", timeout=30, interval=0.05)

    ids = await task_ids_by_name(http, root_id)
    assert receiver.statuses[0] == 500
    # The refused update was delivered again, first, and then every other one in order.
    delivered = receiver.accepted()
    assert delivered[0] == receiver.bodies[0]
    assert delivered[0]["event"] == "task_status_update" and delivered[0]["task_id"] == root_id
    completed = [b["task_id"] for b in delivered if b["event"] == "task_completed"]
    assert completed == [ids["a"], ids["b"], ids["c"], root_id]
    assert delivered[-1]["progress"] == 1.0
    assert all(h.get("authorization") == "Bearer push-secret" for h in receiver.headers)
    assert {b["protocol"] for b in delivered} == {"a2a"}


async def test_another_tenant_can_neither_execute_nor_cancel_a_tree(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    created = await rpc(http, "tasks.create", {"tasks": chain_tree()})
    root_id = created["id"]
    async with client_for(stack, callers["mallory"]) as other:
        for method in ("tasks.execute", "tasks.cancel"):
            error = await rpc_error(other, method, {"task_id": root_id})
            assert error["code"] == -32001, (method, error)
    root = await rpc(http, "tasks.get", {"task_id": root_id})
    assert root["status"] == "pending" and root["workflow_id"] is None


async def test_concurrent_executes_of_one_tree_start_it_once(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    created = await rpc(http, "tasks.create", {"tasks": chain_tree()})
    root_id = created["id"]
    request = {"jsonrpc": "2.0", "id": 1, "method": "tasks.execute", "params": {"task_id": root_id}}
    replies = await asyncio.gather(*(http.post("/", json=request) for _ in range(6)))
    bodies = [r.json() for r in replies]
    started = [b["result"] for b in bodies if "result" in b]
    assert len(started) == 1, bodies
    assert {b["error"]["code"] for b in bodies if "error" in b} == {-32000}
    root = await settled(http, root_id, stack)
    assert root["status"] == "completed" and root["workflow_id"] == started[0]["workflow_id"]


async def test_a_subtree_already_running_keeps_its_tree_from_starting(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    ask = {"id": "ask", "name": "ask", "parent_id": "root", "schemas": {"method": "prompt"}}
    created = await rpc(http, "tasks.create", {"tasks": [ROOT, ask]})
    ask_id = next(t["id"] for t in created["tasks"] if t["ref"] == "ask")
    await rpc(http, "tasks.execute", {"task_id": ask_id})
    error = await rpc_error(http, "tasks.execute", {"task_id": created["id"]})
    assert error["code"] == -32000
    root = await rpc(http, "tasks.get", {"task_id": created["id"]})
    assert (root["status"], root["workflow_id"]) == ("pending", None)
    assert (await rpc(http, "tasks.cancel", {"task_id": ask_id}))["status"] == "cancelled"


async def test_a_tool_is_an_executor_and_its_inputs_are_the_arguments(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    # The seed's own shape: schemas.method names the executor, inputs are its arguments.
    task = {"name": "count", "schemas": {"method": "word_count"}, "inputs": {"text": "one two"}}
    started = await rpc(http, "tasks.execute", {"tasks": [task]})
    done = await settled(http, started["root_task_id"], stack)
    assert done["status"] == "completed"
    assert done["result"] == {"words": 2, "characters": 7, "sentences": 1}


async def test_tasks_get_their_start_and_end_times(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    created = await rpc(
        http,
        "tasks.create",
        {"name": "timed", "schemas": {"method": "word_count"}, "inputs": {"text": "a b c"}},
    )
    pending = await rpc(http, "tasks.get", {"task_id": created["id"]})
    assert (pending["started_at"], pending["completed_at"]) == (None, None)
    await rpc(http, "tasks.execute", {"task_id": created["id"]})
    done = await settled(http, created["id"], stack)
    started_at = datetime.fromisoformat(done["started_at"])
    completed_at = datetime.fromisoformat(done["completed_at"])
    created_at = datetime.fromisoformat(done["created_at"])
    assert created_at <= started_at <= completed_at
    # A child task starts with its node, not with the tree.
    started = await rpc(http, "tasks.execute", {"tasks": chain_tree()})
    await settled(http, started["root_task_id"], stack)
    ids = await task_ids_by_name(http, started["root_task_id"])
    a = await rpc(http, "tasks.get", {"task_id": ids["a"]})
    c = await rpc(http, "tasks.get", {"task_id": ids["c"]})
    assert a["started_at"] and a["completed_at"] and c["started_at"] and c["completed_at"]
    assert datetime.fromisoformat(a["completed_at"]) <= datetime.fromisoformat(c["started_at"])
    # A copy starts over: no times.
    copied = await rpc(http, "tasks.copy", {"task_id": created["id"]})
    fresh = await rpc(http, "tasks.get", {"task_id": copied["copied_task_id"]})
    assert (fresh["started_at"], fresh["completed_at"]) == (None, None)


async def test_unknown_executors_and_bad_tool_arguments_use_the_seed_codes(
    http: httpx.AsyncClient,
) -> None:
    unknown = await rpc_error(
        http, "tasks.execute", {"tasks": [{"name": "x", "schemas": {"method": "no_such_tool"}}]}
    )
    assert unknown["code"] == -32003
    assert "no_such_tool" in unknown["message"] + str(unknown.get("data"))
    bad = await rpc_error(
        http,
        "tasks.execute",
        {"tasks": [{"name": "x", "schemas": {"method": "word_count"}, "inputs": {"txt": "a"}}]},
    )
    assert bad["code"] == -32602, bad
    assert "text" in str(bad.get("data")), bad
    wrong_type = await rpc_error(
        http,
        "tasks.execute",
        {"tasks": [{"name": "x", "schemas": {"method": "word_count"}, "inputs": {"text": 7}}]},
    )
    assert wrong_type["code"] == -32602, wrong_type
    assert "text" in str(wrong_type.get("data")), wrong_type


async def test_execute_takes_budget_deadline_and_conversation_like_post_runs(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    task = {"name": "count", "schemas": {"method": "word_count"}, "inputs": {"text": "a b"}}
    options = {
        "budget": {"max_tool_calls": 5},
        "deadline_seconds": 600,
        "conversation_id": f"tasks-{unique}",
    }
    started = await rpc(http, "tasks.execute", {"tasks": [task], **options})
    run = (await http.get(f"/runs/{started['workflow_id']}")).json()
    conversation = (await http.get(f"/conversations/tasks-{unique}/runs")).json()
    assert conversation["history"] == [started["workflow_id"]], conversation
    assert run["deadline_at"] is not None and run["budget"]["limits"]["max_tool_calls"] == 5
    assert (await settled(http, started["root_task_id"], stack))["status"] == "completed"

    listed = (await http.get("/runs")).json()["total"]
    bad = {"budget": {"max_tool_calls": -1}, "deadline_seconds": "soon", "conversation_id": ""}
    for field, value in bad.items():
        error = await rpc_error(http, "tasks.execute", {"tasks": [task], field: value})
        assert error["code"] == -32602, error
        assert error["data"]["field"].startswith(f"params.{field}"), error
    assert (await http.get("/runs")).json()["total"] == listed, "no run started"
