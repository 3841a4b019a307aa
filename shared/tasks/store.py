"""Seed 003 tasks in MongoDB: the ``tasks`` collection.

CONTRACT (rpc methods and the task executor use these names).

Collection::

    tasks   _id=task id (UUID text); the ``Task`` fields except ``id``; version
            (int, +1 on every write), created_at (insert), updated_at ($currentDate)
            indexes: (tenant_id, user_id, status), (tenant_id, parent_id),
            (tenant_id, dependencies.id), (tenant_id, created_at), workflow_id

Every query names the tenant, so another tenant's task is simply not found.
Writes are atomic single-document operations guarded in their filter (by
``version`` for read-validate-write updates, by ``status`` for transitions):
two writers never overwrite each other's check. ``find_one_and_update`` and
``find_one_and_delete`` behave as in MongoDB on nx-27017 (probed: a guard that
does not match returns None, no error is swallowed). Query array members with
``$elemMatch``: nx-27017 misanswers ``{"dependencies.id": x}`` once that
path is indexed (it matches nothing). Changes to the dependency
graph of a tenant (create with dependencies, dependency updates, deletes) run
under a per-tenant lease in ``task_locks`` so that two concurrent writes cannot
together close a cycle that each alone would not.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pymongo import ASCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError

from spindle.shared.contracts.errors import Unavailable
from spindle.shared.contracts.tasks import Task, new_task_id, parse_datetime, utcnow
from spindle.shared.platform.mongo import mongo_client

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

    from spindle.shared.platform.settings import Settings

TASKS = "tasks"
LOCKS = "task_locks"
# A lock holder that died frees its lease after this long.
LEASE = timedelta(seconds=10)
LOCK_WAIT_SECONDS = 10.0
# Bound on tree walks: a tree deeper or larger than this is refused rather than walked forever.
MAX_TREE_TASKS = 10_000


def to_document(task: Task) -> dict[str, Any]:
    """The stored form of ``task`` (``_id`` instead of ``id``)."""
    body = task.model_dump(mode="python", exclude={"id"})
    body["schemas"] = task.schemas.model_dump(mode="json")
    body["dependencies"] = [dep.model_dump() for dep in task.dependencies]
    body["_id"] = task.id
    return body


def from_document(doc: dict[str, Any]) -> Task:
    body = dict(doc)
    body["id"] = body.pop("_id")
    return Task.model_validate(body)


class TaskStore:
    """Tasks of every tenant, in one collection.

    Args:
        database: the Mongo database (the archive's, so one client serves both).
    """

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self._db = database
        self._indexed = False
        self._index_lock = asyncio.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> TaskStore:
        return cls(mongo_client(settings, appname="spindle-tasks")[settings.mongo_db])

    @property
    def tasks(self) -> AsyncCollection[dict[str, Any]]:
        return self._db[TASKS]

    @property
    def locks(self) -> AsyncCollection[dict[str, Any]]:
        return self._db[LOCKS]

    async def ensure_indexes(self) -> None:
        """Create the indexes the task queries need (idempotent, once per store)."""
        if self._indexed:
            return
        async with self._index_lock:
            if self._indexed:
                return
            await self.tasks.create_index(
                [("tenant_id", ASCENDING), ("user_id", ASCENDING), ("status", ASCENDING)],
                name="tenant_user_status",
            )
            await self.tasks.create_index(
                [("tenant_id", ASCENDING), ("parent_id", ASCENDING)], name="tenant_parent"
            )
            await self.tasks.create_index(
                [("tenant_id", ASCENDING), ("dependencies.id", ASCENDING)],
                name="tenant_dependencies",
            )
            await self.tasks.create_index(
                [("tenant_id", ASCENDING), ("created_at", ASCENDING)], name="tenant_created"
            )
            await self.tasks.create_index([("workflow_id", ASCENDING)], name="workflow")
            self._indexed = True

    async def insert(self, task: Task) -> Task:
        """Store a new task (its ``id`` must be fresh)."""
        now = utcnow()
        stored = task.model_copy(update={"created_at": now, "updated_at": now, "version": 0})
        await self.tasks.insert_one(to_document(stored))
        return stored

    async def insert_many(self, tasks: list[Task]) -> list[Task]:
        """Store several new tasks (copies of a tree) in one round trip."""
        now = utcnow()
        stored = [
            task.model_copy(update={"created_at": now, "updated_at": now, "version": 0})
            for task in tasks
        ]
        if stored:
            await self.tasks.insert_many([to_document(task) for task in stored])
        return stored

    async def find(self, tenant_id: str, task_id: str) -> Task | None:
        """The tenant's task, or None (unknown, or another tenant's)."""
        doc = await self.tasks.find_one({"_id": task_id, "tenant_id": tenant_id})
        return from_document(doc) if doc else None

    async def find_many(self, tenant_id: str, task_ids: Iterable[str]) -> dict[str, Task]:
        """The tenant's tasks among ``task_ids``, by id (missing ones left out)."""
        ids = list(dict.fromkeys(task_ids))
        if not ids:
            return {}
        cursor = self.tasks.find({"tenant_id": tenant_id, "_id": {"$in": ids}})
        return {task.id: task for task in [from_document(doc) async for doc in cursor]}

    async def update_guarded(
        self, tenant_id: str, task_id: str, *, version: int, fields: dict[str, Any]
    ) -> Task | None:
        """Set ``fields`` if the task is still at ``version`` (else None: re-read, retry).

        Args:
            fields: stored-form values (``schemas``/``dependencies`` as plain dicts).
        """
        doc = await self.tasks.find_one_and_update(
            {"_id": task_id, "tenant_id": tenant_id, "version": version},
            {"$set": fields, "$inc": {"version": 1}, "$currentDate": {"updated_at": True}},
            return_document=ReturnDocument.AFTER,
        )
        return from_document(doc) if doc else None

    async def update_fields(
        self,
        tenant_id: str,
        task_id: str,
        fields: dict[str, Any],
        *,
        expect_status: Iterable[str] | None = None,
        stamp: Iterable[str] = (),
    ) -> Task | None:
        """Set ``fields`` atomically, if the task's status is one of ``expect_status``.

        For run-driven transitions (status, progress, result, error, run links):
        returns the task after the write, or None when the task is missing or
        its status did not match. ``stamp`` names date fields (``started_at``,
        ``completed_at``) set to the server's time, like ``updated_at``.
        """
        query: dict[str, Any] = {"_id": task_id, "tenant_id": tenant_id}
        if expect_status is not None:
            query["status"] = {"$in": list(expect_status)}
        dates = {"updated_at": True} | dict.fromkeys(stamp, True)
        doc = await self.tasks.find_one_and_update(
            query,
            {"$set": fields, "$inc": {"version": 1}, "$currentDate": dates},
            return_document=ReturnDocument.AFTER,
        )
        return from_document(doc) if doc else None

    async def list_page(
        self,
        tenant_id: str,
        *,
        user_id: str | None = None,
        status: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> tuple[list[Task], int]:
        """A page of the tenant's tasks (oldest first) and the total matching."""
        query: dict[str, Any] = {"tenant_id": tenant_id}
        if user_id is not None:
            query["user_id"] = user_id
        if status is not None:
            query["status"] = status
        total = await self.tasks.count_documents(query)
        cursor = (
            self.tasks.find(query)
            .sort([("created_at", ASCENDING), ("_id", ASCENDING)])
            .skip(offset)
            .limit(limit)
        )
        return [from_document(doc) async for doc in cursor], total

    async def children(self, tenant_id: str, parent_id: str) -> list[Task]:
        """Direct children of ``parent_id`` (oldest first)."""
        cursor = self.tasks.find({"tenant_id": tenant_id, "parent_id": parent_id}).sort(
            [("created_at", ASCENDING), ("_id", ASCENDING)]
        )
        return [from_document(doc) async for doc in cursor]

    async def dependents(self, tenant_id: str, task_id: str) -> list[Task]:
        """Tasks that list ``task_id`` among their dependencies."""
        # $elemMatch, not "dependencies.id": nx-27017 answers the dotted form wrongly
        # (no match) once the (tenant_id, dependencies.id) index exists.
        cursor = self.tasks.find(
            {"tenant_id": tenant_id, "dependencies": {"$elemMatch": {"id": task_id}}}
        )
        return [from_document(doc) async for doc in cursor]

    async def descendants(self, tenant_id: str, root_id: str) -> list[Task]:
        """Every task below ``root_id``, breadth first (the root excluded)."""
        found: list[Task] = []
        frontier = [root_id]
        seen = {root_id}
        while frontier:
            cursor = self.tasks.find({"tenant_id": tenant_id, "parent_id": {"$in": frontier}})
            level = [from_document(doc) async for doc in cursor]
            level = [task for task in level if task.id not in seen]
            level.sort(key=lambda task: (task.created_at or utcnow(), task.id))
            seen.update(task.id for task in level)
            found.extend(level)
            if len(found) > MAX_TREE_TASKS:
                raise Unavailable(f"task tree larger than {MAX_TREE_TASKS} tasks")
            frontier = [task.id for task in level]
        return found

    async def claim_root(self, tenant_id: str, root_id: str, workflow_id: str) -> bool:
        """Start the root of a tree in run ``workflow_id``: only a pending root that
        belongs to no run is claimed (False otherwise, nothing written)."""
        claimed = await self.tasks.find_one_and_update(
            {"_id": root_id, "tenant_id": tenant_id, "status": "pending", "workflow_id": None},
            {
                "$set": {
                    "status": "in_progress",
                    "progress": 0.0,
                    "workflow_id": workflow_id,
                    "root_task_id": root_id,
                    "result": None,
                    "error": None,
                    "completed_at": None,
                },
                "$inc": {"version": 1},
                # The root starts with the run; its nodes' tasks when their node does.
                "$currentDate": {"updated_at": True, "started_at": True},
            },
        )
        return claimed is not None

    async def link_to_run(
        self, tenant_id: str, task_ids: list[str], *, root_id: str, workflow_id: str
    ) -> bool:
        """Link pending tasks of no run to run ``workflow_id`` under ``root_id``;
        True when every one of them was linked."""
        linked = await self.tasks.update_many(
            {
                "_id": {"$in": task_ids},
                "tenant_id": tenant_id,
                "status": "pending",
                "workflow_id": None,
            },
            {
                "$set": {"workflow_id": workflow_id, "root_task_id": root_id, "progress": 0.0},
                "$inc": {"version": 1},
                "$currentDate": {"updated_at": True},
            },
        )
        return linked.modified_count == len(task_ids)

    async def unlink_from_run(self, tenant_id: str, task_ids: list[str], workflow_id: str) -> None:
        """Undo ``claim_root``/``link_to_run`` of run ``workflow_id`` (pending again)."""
        await self.tasks.update_many(
            {"tenant_id": tenant_id, "_id": {"$in": task_ids}, "workflow_id": workflow_id},
            {
                "$set": {
                    "status": "pending",
                    "workflow_id": None,
                    "root_task_id": None,
                    "started_at": None,
                },
                "$inc": {"version": 1},
                "$currentDate": {"updated_at": True},
            },
        )

    async def run_members(self, tenant_id: str, workflow_id: str) -> list[dict[str, Any]]:
        """The stored documents of every task of the tenant linked to run ``workflow_id``."""
        return await self.tasks.find({"tenant_id": tenant_id, "workflow_id": workflow_id}).to_list(
            None
        )

    async def delete_if(self, tenant_id: str, task_id: str, *, status: str) -> bool:
        """Delete the task if its status is still ``status``."""
        result = await self.tasks.delete_one(
            {"_id": task_id, "tenant_id": tenant_id, "status": status}
        )
        return result.deleted_count == 1

    @asynccontextmanager
    async def graph_lock(self, tenant_id: str) -> AsyncIterator[None]:
        """Hold the tenant's task-graph lease (dependency and tree changes)."""
        key = f"graph:{tenant_id}"
        owner = new_task_id()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LOCK_WAIT_SECONDS
        delay = 0.002
        while True:
            now = utcnow()
            try:
                await self.locks.insert_one({"_id": key, "owner": owner, "expires_at": now + LEASE})
                break
            except DuplicateKeyError:
                # A dead holder's lease is taken over (guarded on its expiry).
                stale = await self.locks.find_one({"_id": key})
                if stale is not None and _expired(stale.get("expires_at"), now):
                    await self.locks.delete_one({"_id": key, "expires_at": stale["expires_at"]})
                    continue
            if loop.time() > deadline:
                raise Unavailable("the task graph is busy; retry")
            await asyncio.sleep(delay)  # backoff between lock attempts, not a wait for a result
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            await self.locks.delete_one({"_id": key, "owner": owner})


def _expired(value: Any, now: Any) -> bool:
    parsed = parse_datetime(value)
    try:
        return bool(parsed < now)
    except TypeError:
        return True
