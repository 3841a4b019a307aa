"""Evaluations and their per-run results, in MongoDB (docs/replay-and-compare.md#evaluations).

Two collections, next to the run archive's::

    evaluations       _id = evaluation id; tenant_id, user_id, status, error, request
                      (the POST body), graph (the sources' graph, for the list), total,
                      created_at, updated_at — index (tenant_id, created_at)
    evaluation_runs   _id = "<evaluation id>:<index, 6 digits>"; evaluation_id, index,
                      source_id, and what ``EvaluationRunEntry`` holds (fork_id, outcome,
                      changed nodes, checks, totals) — index (evaluation_id, index)

The gateway writes the evaluation and one pending entry per source run before the
workflow starts; the workflow's activities fill the entries in (each write an
idempotent ``$set`` of one entry, so a retried activity writes the same) and set
the status at the end. The workflow keeps none of it: it reads one page of entries
at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING
from pymongo.asynchronous.database import AsyncDatabase

from spindle.shared.contracts.evaluations import (
    CheckCounts,
    CheckResult,
    EvaluationListItem,
    EvaluationRunEntry,
    EvaluationStatus,
    EvaluationSummary,
    PageRun,
    SpendTotals,
)

EVALUATIONS = "evaluations"
EVALUATION_RUNS = "evaluation_runs"
_FINISHED = ("same", "changed", "failed")


def entry_id(evaluation_id: str, index: int) -> str:
    """The ``evaluation_runs`` id of one source run of an evaluation."""
    return f"{evaluation_id}:{index:06d}"


def _add(total: SpendTotals, part: SpendTotals | None) -> None:
    if part is None:
        return
    total.tokens += part.tokens
    total.cost = round(total.cost + part.cost, 9)
    total.tool_calls += part.tool_calls
    total.duration_ms = round(total.duration_ms + part.duration_ms, 3)


def summarize(entries: Sequence[EvaluationRunEntry]) -> EvaluationSummary:
    """Counts, checks passed per name and the totals (with deltas) of ``entries``."""
    summary = EvaluationSummary(runs=len(entries))
    for entry in entries:
        if entry.outcome in ("same", "changed", "failed"):
            setattr(summary, entry.outcome, getattr(summary, entry.outcome) + 1)
        else:
            summary.pending += 1
        for name, result in entry.checks.items():
            counts = summary.checks.setdefault(name, CheckCounts())
            if result.passed:
                counts.passed += 1
            else:
                counts.failed += 1
        _add(summary.source, entry.source_totals)
        _add(summary.candidate, entry.candidate_totals)
    summary.delta = SpendTotals(
        tokens=summary.candidate.tokens - summary.source.tokens,
        cost=round(summary.candidate.cost - summary.source.cost, 9),
        tool_calls=summary.candidate.tool_calls - summary.source.tool_calls,
        duration_ms=round(summary.candidate.duration_ms - summary.source.duration_ms, 3),
    )
    return summary


class EvaluationStore:
    """The two collections (see the module docstring).

    Args:
        database: the archive's database (``RunArchive.database``).
    """

    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        self.evaluations = database[EVALUATIONS]
        self.runs = database[EVALUATION_RUNS]

    async def ensure_indexes(self) -> None:
        await self.evaluations.create_index([("tenant_id", ASCENDING), ("created_at", DESCENDING)])
        await self.runs.create_index([("evaluation_id", ASCENDING), ("index", ASCENDING)])

    async def create(
        self,
        evaluation_id: str,
        *,
        tenant_id: str,
        user_id: str | None,
        request: dict[str, Any],
        graph: str | None,
        source_ids: Sequence[str],
    ) -> None:
        """The evaluation (``running``) and one pending entry per source run."""
        now = datetime.now(UTC)
        await self.ensure_indexes()
        entries = [
            {
                "_id": entry_id(evaluation_id, index),
                "evaluation_id": evaluation_id,
                **EvaluationRunEntry(index=index, source_id=source).model_dump(mode="json"),
            }
            for index, source in enumerate(source_ids)
        ]
        for first in range(0, len(entries), 1000):
            await self.runs.insert_many(entries[first : first + 1000], ordered=False)
        await self.evaluations.insert_one(
            {
                "_id": evaluation_id,
                "tenant_id": tenant_id,
                "user_id": user_id,
                "status": "running",
                "error": None,
                "request": request,
                "graph": graph,
                "total": len(entries),
                "created_at": now,
                "updated_at": now,
            }
        )

    async def get(self, evaluation_id: str) -> dict[str, Any] | None:
        return await self.evaluations.find_one({"_id": evaluation_id})

    async def list_for(
        self, tenant_id: str, *, limit: int, offset: int
    ) -> tuple[list[EvaluationListItem], int]:
        """The tenant's evaluations, newest first, and how many there are."""
        query = {"tenant_id": tenant_id}
        total = await self.evaluations.count_documents(query)
        cursor = (
            self.evaluations.find(query)
            .sort([("created_at", DESCENDING), ("_id", DESCENDING)])
            .skip(offset)
            .limit(limit)
        )
        items = []
        async for doc in cursor:
            done = await self.runs.count_documents(
                {"evaluation_id": doc["_id"], "outcome": {"$in": list(_FINISHED)}}
            )
            items.append(
                EvaluationListItem(
                    evaluation_id=doc["_id"],
                    status=doc["status"],
                    created_at=doc["created_at"],
                    updated_at=doc["updated_at"],
                    runs=int(doc.get("total") or 0),
                    done=done,
                    graph=doc.get("graph"),
                )
            )
        return items, total

    async def set_status(
        self, evaluation_id: str, status: EvaluationStatus, error: str | None = None
    ) -> None:
        """The evaluation's status (a finished one keeps its first end)."""
        await self.evaluations.update_one(
            {"_id": evaluation_id, "status": "running"},
            {"$set": {"status": status, "error": error, "updated_at": datetime.now(UTC)}},
        )

    async def page(self, evaluation_id: str, first: int, size: int) -> list[PageRun]:
        """The runs ``first .. first+size-1`` not finished yet, in index order."""
        cursor = self.runs.find(
            {
                "evaluation_id": evaluation_id,
                "index": {"$gte": first, "$lt": first + size},
                "outcome": {"$nin": list(_FINISHED)},
            },
            {"index": 1, "source_id": 1, "fork_id": 1},
        ).sort("index", ASCENDING)
        return [
            PageRun(index=int(doc["index"]), source_id=doc["source_id"], fork_id=doc.get("fork_id"))
            async for doc in cursor
        ]

    async def update_entry(self, evaluation_id: str, index: int, **fields: Any) -> None:
        """Set fields of one run's entry (idempotent)."""
        await self.runs.update_one({"_id": entry_id(evaluation_id, index)}, {"$set": fields})
        await self.evaluations.update_one(
            {"_id": evaluation_id}, {"$set": {"updated_at": datetime.now(UTC)}}
        )

    async def set_checks(
        self, evaluation_id: str, index: int, checks: dict[str, CheckResult]
    ) -> None:
        """Add check results to one run's entry (the scoring graphs')."""
        await self.update_entry(
            evaluation_id,
            index,
            **{f"checks.{name}": result.model_dump(mode="json") for name, result in checks.items()},
        )

    async def entries(
        self, evaluation_id: str, *, offset: int = 0, limit: int | None = None
    ) -> list[EvaluationRunEntry]:
        """The evaluation's entries in index order (a window of them with ``limit``)."""
        cursor = self.runs.find({"evaluation_id": evaluation_id}).sort("index", ASCENDING)
        if offset:
            cursor = cursor.skip(offset)
        if limit is not None:
            cursor = cursor.limit(limit)
        found = []
        async for doc in cursor:
            doc.pop("_id", None)
            doc.pop("evaluation_id", None)
            found.append(EvaluationRunEntry.model_validate(doc))
        return found

    async def fail_running(self, evaluation_id: str, error: str) -> None:
        """Mark the runs whose forks were still running as failed with ``error``."""
        await self.runs.update_many(
            {"evaluation_id": evaluation_id, "outcome": "running"},
            {"$set": {"outcome": "failed", "error": error}},
        )

    async def done_counts(self, evaluation_id: str) -> dict[str, int]:
        """How many runs ended same / changed / failed so far."""
        return {
            outcome: await self.runs.count_documents(
                {"evaluation_id": evaluation_id, "outcome": outcome}
            )
            for outcome in _FINISHED
        }
