"""Seed 003's JSON-RPC task methods over HTTP (2/2): tasks.update, tasks.delete,
tasks.list, tasks.tree, tasks.children and tasks.copy, one test per MUST.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.e2e.jsonrpc_client import (
    EXECUTOR,
    create,
    fails,
    ok,
)

pytestmark = pytest.mark.e2e


# --- tasks.update ---------------------------------------------------------------------


async def test_update_changes_the_given_fields_only(http: httpx.AsyncClient, unique: str) -> None:
    task_id = await create(http, f"before {unique}", inputs={"keep": 1})
    result = await ok(
        http,
        "tasks.update",
        {"task_id": task_id, "updates": {"name": f"after {unique}", "priority": 1}},
    )
    assert (result["id"], result["status"]) == (task_id, "pending")
    task = await ok(http, "tasks.get", {"task_id": task_id})
    assert (task["name"], task["priority"], task["inputs"]) == (f"after {unique}", 1, {"keep": 1})


@pytest.mark.parametrize(
    ("updates", "field"),
    [
        ({"priority": 9}, "updates.priority"),
        ({"name": ""}, "updates.name"),
        ({"status": "exploded"}, "updates.status"),
        ({"progress": 1.5}, "updates.progress"),
        ({"id": str(uuid.uuid4())}, "updates.id"),
        ({"tenant_id": "other"}, "updates.tenant_id"),
        ({"bogus": 1}, "updates.bogus"),
        ({"name": None}, "updates.name"),
        ({}, "updates"),
    ],
)
async def test_update_validates_against_the_task_schema(
    http: httpx.AsyncClient, unique: str, updates: dict[str, Any], field: str
) -> None:
    task_id = await create(http, f"u {unique}")
    await fails(http, "tasks.update", {"task_id": task_id, "updates": updates}, -32602, field)
    assert (await ok(http, "tasks.get", {"task_id": task_id}))["name"] == f"u {unique}"


async def test_update_refuses_critical_fields_while_executing(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    carol = clients["carol"]  # an admin, who could otherwise reassign the task
    parent = await create(carol, f"p {unique}")
    task_id = await create(carol, f"running {unique}")
    await ok(carol, "tasks.update", {"task_id": task_id, "updates": {"status": "in_progress"}})
    for key, value in (("parent_id", parent), ("user_id", "bob")):
        await fails(
            carol,
            "tasks.update",
            {"task_id": task_id, "updates": {key: value}},
            -32602,
            f"updates.{key}",
        )
    # Other fields stay editable, and the same critical fields are fine once it stops.
    await ok(carol, "tasks.update", {"task_id": task_id, "updates": {"name": f"renamed {unique}"}})
    await ok(carol, "tasks.update", {"task_id": task_id, "updates": {"status": "failed"}})
    await ok(carol, "tasks.update", {"task_id": task_id, "updates": {"parent_id": parent}})
    task = await ok(carol, "tasks.get", {"task_id": task_id})
    assert (task["parent_id"], task["user_id"]) == (parent, "carol")


async def test_update_refuses_circular_dependencies(http: httpx.AsyncClient, unique: str) -> None:
    a = await create(http, f"a {unique}")
    b = await create(http, f"b {unique}", dependencies=[a])
    c = await create(http, f"c {unique}", dependencies=[b])
    await fails(http, "tasks.update", {"task_id": a, "updates": {"dependencies": [c]}}, -32002)
    await fails(http, "tasks.update", {"task_id": a, "updates": {"dependencies": [a]}}, -32002)
    assert (await ok(http, "tasks.get", {"task_id": a}))["dependencies"] == []
    # A parent that is the task's own descendant is a cycle too.
    child = await create(http, f"child {unique}", parent_id=a)
    await fails(http, "tasks.update", {"task_id": a, "updates": {"parent_id": child}}, -32002)
    # An acyclic change goes through.
    await ok(http, "tasks.update", {"task_id": c, "updates": {"dependencies": [a, b]}})


async def test_update_refuses_an_unknown_executor(http: httpx.AsyncClient, unique: str) -> None:
    task_id = await create(http, f"x {unique}")
    updates = {"schemas": {"method": "no-such-executor"}}
    await fails(http, "tasks.update", {"task_id": task_id, "updates": updates}, -32003)


async def test_only_the_owner_or_an_admin_changes_a_task(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    task_id = await create(clients["alice"], f"alice's {unique}")
    params = {"task_id": task_id, "updates": {"name": "bob was here"}}
    await fails(clients["bob"], "tasks.update", params, -32004)
    await fails(clients["bob"], "tasks.delete", {"task_id": task_id}, -32004)
    # Reading is tenant-wide; an admin may change it.
    assert (await ok(clients["bob"], "tasks.get", {"task_id": task_id}))[
        "name"
    ] == f"alice's {unique}"
    await ok(clients["carol"], "tasks.update", {**params, "updates": {"name": "by carol"}})


# --- tasks.delete ---------------------------------------------------------------------


async def test_delete_removes_a_pending_task(http: httpx.AsyncClient, unique: str) -> None:
    task_id = await create(http, f"gone {unique}")
    assert await ok(http, "tasks.delete", {"task_id": task_id}) == {
        "success": True,
        "deleted": [task_id],
    }
    await fails(http, "tasks.get", {"task_id": task_id}, -32001)
    await fails(http, "tasks.delete", {"task_id": task_id}, -32001)


@pytest.mark.parametrize("status", ["in_progress", "completed", "failed", "cancelled"])
async def test_delete_refuses_a_task_that_is_not_pending(
    http: httpx.AsyncClient, unique: str, status: str
) -> None:
    task_id = await create(http, f"{status} {unique}")
    await ok(http, "tasks.update", {"task_id": task_id, "updates": {"status": status}})
    error = await fails(http, "tasks.delete", {"task_id": task_id}, -32602, "task_id")
    assert status in error["data"]["reason"]
    assert (await ok(http, "tasks.get", {"task_id": task_id}))["status"] == status


async def test_delete_refuses_a_task_with_children_or_dependents(
    http: httpx.AsyncClient, unique: str
) -> None:
    parent = await create(http, f"parent {unique}")
    await create(http, f"child {unique}", parent_id=parent)
    error = await fails(http, "tasks.delete", {"task_id": parent}, -32602, "task_id")
    assert "children" in error["data"]["reason"]
    needed = await create(http, f"needed {unique}")
    await create(http, f"needs {unique}", dependencies=[needed])
    error = await fails(http, "tasks.delete", {"task_id": needed}, -32602, "task_id")
    assert "dependents" in error["data"]["reason"]
    for task_id in (parent, needed):
        await ok(http, "tasks.get", {"task_id": task_id})


async def test_delete_with_cascade_removes_the_descendants(
    http: httpx.AsyncClient, unique: str
) -> None:
    root = await create(http, f"root {unique}")
    child = await create(http, f"child {unique}", parent_id=root)
    grandchild = await create(http, f"grandchild {unique}", parent_id=child, dependencies=[child])
    result = await ok(http, "tasks.delete", {"task_id": root, "cascade": True})
    assert set(result["deleted"]) == {root, child, grandchild}
    for task_id in (root, child, grandchild):
        await fails(http, "tasks.get", {"task_id": task_id}, -32001)


# --- tasks.list -----------------------------------------------------------------------


async def test_list_pages_with_limit_offset_and_total(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    owner = f"lister-{unique}"
    carol = clients["carol"]  # an admin creates tasks for a user of her own tenant
    tasks = [{"name": f"t{i:03d}", "user_id": owner} for i in range(105)]
    await ok(carol, "tasks.create", {"tasks": tasks})
    first = await ok(carol, "tasks.list", {"user_id": owner})
    assert (first["total"], first["limit"], first["offset"]) == (105, 100, 0)
    assert len(first["tasks"]) == 100
    rest = await ok(carol, "tasks.list", {"user_id": owner, "offset": 100, "limit": 50})
    assert (len(rest["tasks"]), rest["total"]) == (5, 105)
    whole = await ok(carol, "tasks.list", {"user_id": owner, "limit": 1000})
    # Pages are consecutive slices of one stable order.
    assert [t["id"] for t in first["tasks"] + rest["tasks"]] == [t["id"] for t in whole["tasks"]]
    assert {t["name"] for t in whole["tasks"]} == {f"t{i:03d}" for i in range(105)}
    await fails(carol, "tasks.list", {"limit": 1001}, -32602, "limit")
    await fails(carol, "tasks.list", {"limit": 0}, -32602, "limit")
    await fails(carol, "tasks.list", {"offset": -1}, -32602, "offset")
    await fails(carol, "tasks.list", {"status": "sleeping"}, -32602, "status")


async def test_list_filters_by_status_and_user(
    clients: dict[str, httpx.AsyncClient], unique: str
) -> None:
    owner = f"filter-{unique}"
    carol = clients["carol"]
    made = await ok(
        carol, "tasks.create", {"tasks": [{"name": f"f{i}", "user_id": owner} for i in range(3)]}
    )
    done = made["tasks"][1]["id"]
    await ok(carol, "tasks.update", {"task_id": done, "updates": {"status": "completed"}})
    completed = await ok(carol, "tasks.list", {"user_id": owner, "status": "completed"})
    assert ([t["id"] for t in completed["tasks"]], completed["total"]) == ([done], 1)
    pending = await ok(carol, "tasks.list", {"user_id": owner, "status": "pending"})
    assert pending["total"] == 2
    assert {t["user_id"] for t in pending["tasks"]} == {owner}


# --- tasks.tree / tasks.children ------------------------------------------------------


async def test_tree_returns_all_descendants_and_children_only_direct_ones(
    http: httpx.AsyncClient, unique: str
) -> None:
    root = await create(http, f"root {unique}")
    left = await create(http, "left", parent_id=root)
    right = await create(http, "right", parent_id=root)
    leaf = await create(http, "leaf", parent_id=left)
    deeper = await create(http, "deeper", parent_id=leaf)
    tree = await ok(http, "tasks.tree", {"task_id": root})
    assert tree["task"]["id"] == root
    assert {c["task"]["id"] for c in tree["children"]} == {left, right}
    [left_node] = [c for c in tree["children"] if c["task"]["id"] == left]
    assert left_node["children"][0]["task"]["id"] == leaf
    assert left_node["children"][0]["children"][0] == {
        "task": await ok(http, "tasks.get", {"task_id": deeper}),
        "children": [],
    }
    children = await ok(http, "tasks.children", {"parent_id": root})
    assert {c["id"] for c in children["children"]} == {left, right}
    leaf_children = await ok(http, "tasks.children", {"parent_id": leaf})
    assert [c["id"] for c in leaf_children["children"]] == [deeper]
    await fails(http, "tasks.tree", {"task_id": str(uuid.uuid4())}, -32001)
    await fails(http, "tasks.children", {"parent_id": str(uuid.uuid4())}, -32001)


# --- tasks.copy -----------------------------------------------------------------------


async def test_copy_makes_a_fresh_pending_task_with_the_same_definition(
    http: httpx.AsyncClient, unique: str
) -> None:
    dep = await create(http, f"dep {unique}")
    original = await create(
        http,
        f"orig {unique}",
        priority=1,
        inputs={"q": 1},
        schemas={"method": EXECUTOR},
        dependencies=[dep],
    )
    child = await create(http, "child", parent_id=original)
    finished = {"status": "completed", "progress": 1.0, "result": {"answer": 42}}
    await ok(http, "tasks.update", {"task_id": original, "updates": finished})
    result = await ok(http, "tasks.copy", {"task_id": original})
    assert result["original_task_id"] == original
    assert result["status"] == "pending"
    copied = await ok(http, "tasks.get", {"task_id": result["copied_task_id"]})
    assert copied["id"] not in (original, child)
    assert (copied["status"], copied["progress"], copied["result"], copied["error"]) == (
        "pending",
        0.0,
        None,
        None,
    )
    for key in ("name", "priority", "inputs", "schemas", "dependencies"):
        assert copied[key] == (await ok(http, "tasks.get", {"task_id": original}))[key], key
    # Without copy_children the copy has none.
    assert (await ok(http, "tasks.children", {"parent_id": copied["id"]}))["children"] == []


async def test_copy_with_children_copies_the_whole_tree(
    http: httpx.AsyncClient, unique: str
) -> None:
    made = await ok(
        http,
        "tasks.create",
        {
            "tasks": [
                {"id": "r", "name": f"r {unique}"},
                {"id": "x", "name": "x", "parent_id": "r"},
                {"id": "y", "name": "y", "parent_id": "x", "dependencies": ["x"]},
            ]
        },
    )
    ids = {t["ref"]: t["id"] for t in made["tasks"]}
    result = await ok(http, "tasks.copy", {"task_id": ids["r"], "copy_children": True})
    tree = await ok(http, "tasks.tree", {"task_id": result["copied_task_id"]})
    [x] = tree["children"]
    [y] = x["children"]
    assert x["task"]["name"] == "x" and y["task"]["name"] == "y"
    new_ids = {tree["task"]["id"], x["task"]["id"], y["task"]["id"]}
    assert not new_ids & set(ids.values())
    # The copy's dependency points at the copied task, not the original.
    assert y["task"]["dependencies"] == [{"id": x["task"]["id"], "required": True}]
