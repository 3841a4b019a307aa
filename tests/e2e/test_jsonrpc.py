"""Seed 003's JSON-RPC 2.0 task interface over HTTP on the real gateway and Mongo (1/2).

The JSON-RPC 2.0 envelope rules (parse error, invalid request, method not
found, batches, notifications, ids of every type), tasks.create and tasks.get,
tenant isolation, and concurrent writers on one task and one dependency graph.
tests/e2e/test_jsonrpc_tasks.py covers the other methods.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.e2e.jsonrpc_client import (
    EXECUTOR,
    create,
    fails,
    ok,
    post,
    request,
    rpc,
)

pytestmark = pytest.mark.e2e


# --- JSON-RPC 2.0 envelope ------------------------------------------------------------


async def test_unparsable_json_is_a_parse_error_with_null_id(http: httpx.AsyncClient) -> None:
    for path in ("/", "/tasks"):
        reply = await http.post(
            path,
            content=b'{"jsonrpc": "2.0", "method": "tasks.get", "id": 1',
            headers={"content-type": "application/json"},
        )
        assert reply.status_code == 200
        assert reply.json() == {
            "jsonrpc": "2.0",
            "error": {"code": -32700, "message": "Parse error"},
            "id": None,
        }


async def test_invalid_request_objects_are_refused(http: httpx.AsyncClient) -> None:
    reply = await post(http, {"jsonrpc": "1.0", "method": "tasks.list", "id": "v1"})
    assert reply.json()["error"]["code"] == -32600
    assert reply.json()["id"] == "v1"
    reply = await post(http, {"jsonrpc": "2.0", "method": 42, "id": 3})
    assert (reply.json()["error"]["code"], reply.json()["id"]) == (-32600, 3)
    reply = await post(http, 7)
    assert (reply.json()["error"]["code"], reply.json()["id"]) == (-32600, None)


async def test_empty_batch_is_one_invalid_request(http: httpx.AsyncClient) -> None:
    reply = await post(http, [])
    assert reply.status_code == 200
    body = reply.json()
    assert isinstance(body, dict)
    assert (body["error"]["code"], body["id"]) == (-32600, None)


async def test_unknown_method_is_method_not_found(http: httpx.AsyncClient) -> None:
    body = await rpc(http, "tasks.no_such_method", {}, "m1")
    assert body["error"]["code"] == -32601


async def test_ids_of_every_type_are_echoed(http: httpx.AsyncClient) -> None:
    for request_id in ["text-id", 12, 0, -5, 3.25, None]:
        body = await rpc(http, "tasks.list", {"limit": 1}, request_id)
        assert "result" in body
        assert body["id"] == request_id
        assert type(body["id"]) is type(request_id)


async def test_both_endpoints_answer_the_same_methods(http: httpx.AsyncClient, unique: str) -> None:
    task_id = await create(http, f"legacy {unique}")
    reply = await post(http, request("tasks.get", {"task_id": task_id}, "legacy"), path="/tasks")
    assert reply.status_code == 200
    assert reply.json()["result"]["name"] == f"legacy {unique}"


async def test_a_notification_gets_no_response_but_is_executed(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = f"notified {unique}"
    reply = await post(http, {"jsonrpc": "2.0", "method": "tasks.create", "params": {"name": name}})
    assert reply.status_code == 204
    assert reply.content == b""
    listed = await ok(http, "tasks.list", {"limit": 1000, "user_id": "alice"})
    assert name in {task["name"] for task in listed["tasks"]}
    # A notification of an unknown method is not answered either.
    reply = await post(http, {"jsonrpc": "2.0", "method": "tasks.nope", "params": {}})
    assert (reply.status_code, reply.content) == (204, b"")


async def test_batch_answers_each_request_but_no_notification(
    http: httpx.AsyncClient, unique: str
) -> None:
    batch = [
        request("tasks.create", {"name": f"batched {unique}"}, "create"),
        {"jsonrpc": "2.0", "method": "tasks.create", "params": {"name": f"quiet {unique}"}},
        1,
        request("tasks.nope", {}, "unknown"),
        request("tasks.get", {"task_id": "not-a-uuid"}, 99),
        {"method": "tasks.list", "id": "missing-version"},
    ]
    reply = await post(http, batch)
    assert reply.status_code == 200
    answers = reply.json()
    assert isinstance(answers, list)
    assert len(answers) == 5
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    created = by_id["create"]["result"]
    assert created["status"] == "pending"
    assert uuid.UUID(created["id"])
    assert by_id["unknown"]["error"]["code"] == -32601
    assert by_id[99]["error"]["code"] == -32602
    assert by_id[99]["error"]["data"]["field"] == "task_id"
    assert by_id["missing-version"]["error"]["code"] == -32600
    [invalid] = [a for a in answers if a["id"] is None]
    assert invalid["error"]["code"] == -32600
    listed = await ok(http, "tasks.list", {"limit": 1000, "user_id": "alice"})
    assert f"quiet {unique}" in {task["name"] for task in listed["tasks"]}


async def test_a_batch_of_notifications_gets_no_response(http: httpx.AsyncClient) -> None:
    note = {"jsonrpc": "2.0", "method": "tasks.list", "params": {}}
    reply = await post(http, [note, note])
    assert (reply.status_code, reply.content) == (204, b"")


async def test_unauthenticated_calls_get_unauthorized(
    clients: dict[str, httpx.AsyncClient],
) -> None:
    error = await fails(clients["anonymous"], "tasks.list", {}, -32004)
    assert error["message"] == "Unauthorized"


# --- tasks.create ---------------------------------------------------------------------


async def test_create_generates_a_uuid_and_starts_pending(
    http: httpx.AsyncClient, unique: str
) -> None:
    first = await ok(http, "tasks.create", {"name": f"a {unique}", "schemas": {"method": EXECUTOR}})
    second = await ok(http, "tasks.create", {"name": f"a {unique}"})
    assert first["status"] == second["status"] == "pending"
    assert str(uuid.UUID(first["id"])) == first["id"]
    assert first["id"] != second["id"]
    task = await ok(http, "tasks.get", {"task_id": first["id"]})
    assert task["priority"] == 2
    assert task["user_id"] == "alice"
    assert task["schemas"]["method"] == EXECUTOR
    assert task["progress"] == 0.0
    assert task["result"] is None and task["error"] is None


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x", "priority": 4}, "priority"),
        ({"name": "x", "priority": -1}, "priority"),
        ({"name": "x", "priority": "1"}, "priority"),
        ({"name": "x", "parent_id": "not-a-uuid"}, "parent_id"),
        ({"name": "x", "inputs": [1]}, "inputs"),
        ({"name": "x", "dependencies": ["nope"]}, "dependencies[0].id"),
        ({"name": "x", "dependencies": [str(uuid.uuid4())]}, "dependencies[0].id"),
        ({"name": "x", "parent_id": str(uuid.uuid4())}, "parent_id"),
        ({"name": "x", "colour": "red"}, "colour"),
    ],
)
async def test_create_validates_the_task_schema(
    http: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    await fails(http, "tasks.create", params, -32602, field)


async def test_create_refuses_an_unknown_executor(http: httpx.AsyncClient) -> None:
    error = await fails(
        http, "tasks.create", {"name": "x", "schemas": {"method": "no-such-executor"}}, -32003
    )
    assert error["message"] == "Executor not found"


async def test_create_a_tree_with_dependencies_in_one_call(
    http: httpx.AsyncClient, unique: str
) -> None:
    result = await ok(
        http,
        "tasks.create",
        {
            "tasks": [
                {"id": "root", "name": f"root {unique}"},
                {"id": "fetch", "name": "fetch", "parent_id": "root"},
                {"id": "sum", "name": "sum", "parent_id": "root", "dependencies": ["fetch"]},
            ]
        },
    )
    ids = {t["ref"]: t["id"] for t in result["tasks"]}
    assert result["id"] == ids["root"]
    assert len(set(ids.values())) == 3
    summed = await ok(http, "tasks.get", {"task_id": ids["sum"]})
    assert summed["parent_id"] == ids["root"]
    assert summed["dependencies"] == [{"id": ids["fetch"], "required": True}]


async def test_create_refuses_a_tree_with_a_dependency_cycle(http: httpx.AsyncClient) -> None:
    tasks = [
        {"id": "a", "name": "a", "dependencies": ["c"]},
        {"id": "b", "name": "b", "dependencies": ["a"]},
        {"id": "c", "name": "c", "dependencies": ["b"]},
    ]
    error = await fails(http, "tasks.create", {"tasks": tasks}, -32002)
    assert error["message"] == "Circular dependency detected"


# --- tasks.get ------------------------------------------------------------------------


async def test_get_returns_the_complete_task(http: httpx.AsyncClient, unique: str) -> None:
    parent = await create(http, f"parent {unique}")
    dep = await create(http, f"dep {unique}")
    params: dict[str, Any] = {
        "name": f"full {unique}",
        "priority": 0,
        "inputs": {"question": "why?"},
        "params": {"temperature": 0},
        "schemas": {"method": EXECUTOR},
        "parent_id": parent,
        "dependencies": [{"id": dep, "required": False}],
    }
    task_id = (await ok(http, "tasks.create", params))["id"]
    task = await ok(http, "tasks.get", {"task_id": task_id})
    for key, value in params.items():
        if key != "dependencies":
            assert task[key] == value, key
    assert task["dependencies"] == [{"id": dep, "required": False}]
    assert task["id"] == task_id
    assert task["status"] == "pending"
    assert task["created_at"] and task["updated_at"]


async def test_get_of_an_unknown_task_is_task_not_found(http: httpx.AsyncClient) -> None:
    error = await fails(http, "tasks.get", {"task_id": str(uuid.uuid4())}, -32001)
    assert error["message"] == "Task not found"
    await fails(http, "tasks.get", {"task_id": "12"}, -32602, "task_id")
    await fails(http, "tasks.get", {}, -32602, "task_id")


# --- tenants --------------------------------------------------------------------------


async def test_another_tenants_task_is_not_found(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    alice, mallory = clients["alice"], clients["mallory"]
    task_id = await create(alice, f"secret {unique}")
    for method, params in [
        ("tasks.get", {"task_id": task_id}),
        ("tasks.update", {"task_id": task_id, "updates": {"name": "pwned"}}),
        ("tasks.delete", {"task_id": task_id}),
        ("tasks.tree", {"task_id": task_id}),
        ("tasks.children", {"parent_id": task_id}),
        ("tasks.copy", {"task_id": task_id}),
    ]:
        error = await fails(mallory, method, params, -32001)
        assert error["message"] == "Task not found"
    await fails(mallory, "tasks.create", {"name": "x", "parent_id": task_id}, -32602, "parent_id")
    listed = await ok(mallory, "tasks.list", {"limit": 1000})
    assert task_id not in {t["id"] for t in listed["tasks"]}
    assert (await ok(alice, "tasks.get", {"task_id": task_id}))["name"] == f"secret {unique}"


# --- concurrency ----------------------------------------------------------------------


async def test_parallel_updates_of_one_task_lose_nothing(
    http: httpx.AsyncClient, unique: str
) -> None:
    task_id = await create(http, f"busy {unique}")
    updates = [
        {"inputs": {"writer": i}}
        if i % 3 == 0
        else {"priority": i % 4}
        if i % 3 == 1
        else {"name": f"n{i}"}
        for i in range(50)
    ]
    results = await asyncio.gather(
        *(ok(http, "tasks.update", {"task_id": task_id, "updates": u}) for u in updates)
    )
    # Each writer saw its own change applied on top of the others'.
    for update, result in zip(updates, results, strict=True):
        for key, value in update.items():
            assert result[key] == value
    final = await ok(http, "tasks.get", {"task_id": task_id})
    assert final["inputs"] in [u["inputs"] for u in updates if "inputs" in u]
    assert final["name"] in [u["name"] for u in updates if "name" in u]
    # The stored document equals the last write that was acknowledged.
    # Compare instants, not strings (a whole second prints without its fraction).
    last = max(results, key=lambda r: datetime.fromisoformat(r["updated_at"]))
    assert {k: final[k] for k in ("inputs", "name", "priority")} in [
        {k: r[k] for k in ("inputs", "name", "priority")} for r in results
    ]
    assert datetime.fromisoformat(final["updated_at"]) >= datetime.fromisoformat(last["updated_at"])


async def test_parallel_dependency_updates_never_close_a_cycle(
    http: httpx.AsyncClient, unique: str
) -> None:
    ring = [await create(http, f"ring{i} {unique}") for i in range(8)]
    calls = [ok_or_error(http, ring[i], [ring[(i + 1) % len(ring)]]) for i in range(len(ring))]
    outcomes = await asyncio.gather(*calls)
    refused = [o for o in outcomes if o is not None]
    assert refused and set(refused) == {-32002}
    edges = {}
    for task_id in ring:
        task = await ok(http, "tasks.get", {"task_id": task_id})
        edges[task_id] = [d["id"] for d in task["dependencies"]]
    node, steps = ring[0], 0
    while edges[node] and steps <= len(ring):
        node, steps = edges[node][0], steps + 1
    assert steps < len(ring), "the stored dependencies form a cycle"


async def ok_or_error(client: httpx.AsyncClient, task_id: str, deps: list[str]) -> int | None:
    body = await rpc(
        client, "tasks.update", {"task_id": task_id, "updates": {"dependencies": deps}}
    )
    return None if "result" in body else int(body["error"]["code"])


async def test_a_delete_racing_child_creations_leaves_no_orphan(
    http: httpx.AsyncClient, unique: str
) -> None:
    parent = await create(http, f"contested {unique}")
    params = {"name": "late child", "parent_id": parent}
    outcomes = await asyncio.gather(
        *(rpc(http, "tasks.create", params, i) for i in range(10)),
        rpc(http, "tasks.delete", {"task_id": parent}, "delete"),
    )
    deleted = "result" in outcomes[-1]
    created = [o["result"]["id"] for o in outcomes[:-1] if "result" in o]
    if deleted:
        # Creates before the delete would have blocked it; creates after it were refused.
        assert created == []
        await fails(http, "tasks.get", {"task_id": parent}, -32001)
    else:
        children = await ok(http, "tasks.children", {"parent_id": parent})
        assert {c["id"] for c in children["children"]} == set(created)
        assert created


async def test_no_critical_field_changes_once_a_racing_writer_starts_the_task(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    carol = clients["carol"]
    parent = await create(carol, f"new parent {unique}")
    made = await ok(carol, "tasks.create", {"tasks": [{"name": f"r{i}"} for i in range(20)]})
    ids = [t["id"] for t in made["tasks"]]
    start = {"status": "in_progress"}
    move = {"parent_id": parent}
    outcomes = await asyncio.gather(
        *(
            rpc(carol, "tasks.update", {"task_id": task_id, "updates": updates}, n)
            for n, (task_id, updates) in enumerate((t, u) for t in ids for u in (move, start))
        )
    )
    moves = outcomes[0::2]
    for task_id, moved in zip(ids, moves, strict=True):
        final = await ok(carol, "tasks.get", {"task_id": task_id})
        assert final["status"] == "in_progress"
        if "result" in moved:
            # The move was applied before the task started, never after.
            assert moved["result"]["status"] == "pending"
            assert final["parent_id"] == parent
        else:
            assert moved["error"]["data"]["field"] == "updates.parent_id"
            assert final["parent_id"] is None
