"""Human requests (prompts) and every attempt to answer one, in MongoDB.

Two collections, next to the run archive's (docs/graphs/node-types.md, prompt)::

    prompts          _id = "<workflow_id>:<first run id>:<node_id>:<visit>";
                     order = "<asked, epoch µs, 20 digits>:<_id>" (oldest first,
                     unique: the inbox pages by it);
                     tenant_id, workflow_id, node_id, visit, owner, graph_name, prompt,
                     title, ui_schema, requested_at, expires_at, assignees, roles,
                     assigned, status ("open", "answered", "expired", "closed": the run
                     ended with it open — finish_run, or the closed-run sweep for a run
                     Temporal closed without Spindle),
                     closed_at — index (tenant_id, status, order), (workflow_id, status)
    answer_attempts  one per answer attempt: workflow_id, tenant_id, node_id, visit,
                     user_id, at, outcome ("accepted", "invalid", "late", "duplicate",
                     "forbidden", "not_waiting"), detail, client_message_id —
                     index (workflow_id, at)

Who writes what, so that each attempt is kept once:

* the worker's ``request_input`` opens a prompt, ``accept_input`` marks it answered
  and records the **accepted** attempt (its id is the prompt's id, so a retried
  activity writes it once; an ``on_expiry`` answer is recorded as accepted from
  ``system:expiry``), ``expire_input`` marks it expired, ``finish_run`` closes
  what a finished run left open;
* the gateway records every **refused** attempt (schema, late, duplicate,
  forbidden), keyed by the Temporal update id, so a client retrying with the same
  ``client_message_id`` is recorded once.

Every write is an idempotent upsert or ``$set``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field
from pymongo import ASCENDING

from spindle.shared.contracts.runs import PendingInput

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection
    from pymongo.asynchronous.database import AsyncDatabase

PROMPTS_COLLECTION = "prompts"
ATTEMPTS_COLLECTION = "answer_attempts"
# Documents read per round trip while filtering a page of the inbox.
_INBOX_BATCH = 200


class RunKey(Protocol):
    """A run as its activities know it (``RunRef``): workflow id and first run id."""

    @property
    def workflow_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...


class PromptStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"
    EXPIRED = "expired"
    CLOSED = "closed"  # the run ended with the prompt unanswered


class AnswerOutcome(StrEnum):
    """What became of one answer attempt."""

    ACCEPTED = "accepted"
    INVALID = "invalid"  # refused by the prompt's ui_schema (422)
    LATE = "late"  # after the prompt expired (409)
    DUPLICATE = "duplicate"  # after the prompt was answered (409)
    FORBIDDEN = "forbidden"  # not an assignee, assigned role or run-control role (403)
    NOT_WAITING = "not_waiting"  # no such prompt pending, or the run has finished (409)


class PromptRecord(BaseModel):
    """One human request as the inbox lists it."""

    order: str = Field(description="the inbox entry's place: oldest first (its paging cursor)")
    tenant_id: str
    workflow_id: str
    node_id: str
    visit: int = 1
    owner: str | None = Field(None, description="the user who started the run")
    graph_name: str | None = None
    prompt: str
    title: str | None = None
    ui_schema: dict[str, Any]
    requested_at: str
    expires_at: str | None = None
    assignees: list[str] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    status: PromptStatus = PromptStatus.OPEN

    def may_answer(self, user_id: str, roles: tuple[str, ...], run_control: bool) -> bool:
        """Whether this caller may answer (docs/operations/threat-model.md)."""
        if self.assignees or self.roles:
            named = user_id in self.assignees or bool(set(roles) & set(self.roles))
            return run_control or named
        return run_control or self.owner in (None, user_id)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and datetime.fromisoformat(self.expires_at) <= now


class AnswerAttempt(BaseModel):
    """One attempt to answer a prompt, whatever became of it."""

    workflow_id: str
    tenant_id: str
    node_id: str | None = None
    visit: int | None = None
    user_id: str | None = None
    at: datetime
    outcome: AnswerOutcome
    detail: str | None = None
    client_message_id: str | None = None


def prompt_id(run: RunKey, pending: PendingInput) -> str:
    """The ``prompts`` id of ``pending`` in ``run`` (a reused workflow id is another run)."""
    return f"{run.workflow_id}:{run.run_id}:{pending.node_id}:{pending.visit}"


def prompt_order(run: RunKey, pending: PendingInput) -> str:
    """Sorts prompts by when they asked, then by id."""
    asked = datetime.fromisoformat(pending.requested_at)
    micros = int(asked.timestamp() * 1_000_000)
    return f"{micros:020d}:{prompt_id(run, pending)}"


class PromptStore:
    """The ``prompts`` and ``answer_attempts`` collections of one database."""

    def __init__(self, db: AsyncDatabase[dict[str, Any]]) -> None:
        self.prompts: AsyncCollection[dict[str, Any]] = db[PROMPTS_COLLECTION]
        self.attempts: AsyncCollection[dict[str, Any]] = db[ATTEMPTS_COLLECTION]

    async def ensure_indexes(self) -> None:
        """Create the indexes (idempotent; fixed names)."""
        await self.prompts.create_index(
            [("tenant_id", ASCENDING), ("status", ASCENDING), ("order", ASCENDING)],
            name="tenant_status_order",
        )
        await self.prompts.create_index(
            [("workflow_id", ASCENDING), ("status", ASCENDING)], name="workflow_status"
        )
        await self.attempts.create_index(
            [("workflow_id", ASCENDING), ("at", ASCENDING)], name="workflow_at"
        )

    # -- prompts -------------------------------------------------------------

    async def opened(
        self,
        pending: PendingInput,
        *,
        run: RunKey,
        tenant_id: str,
        owner: str | None,
        graph_name: str | None,
    ) -> None:
        """Record that the run asked ``pending`` (a retry changes nothing)."""
        doc = {
            "tenant_id": tenant_id,
            "workflow_id": run.workflow_id,
            "node_id": pending.node_id,
            "visit": pending.visit,
            "order": prompt_order(run, pending),
            "owner": owner,
            "graph_name": graph_name,
            "prompt": pending.prompt,
            "title": pending.title,
            "ui_schema": pending.ui_schema,
            "requested_at": pending.requested_at,
            "expires_at": pending.expires_at,
            "assignees": pending.assignees,
            "roles": pending.roles,
            "assigned": pending.assigned,
        }
        # Asking comes before any answer, so a retried ask may (re)open it.
        doc["status"] = PromptStatus.OPEN.value
        await self.prompts.update_one({"_id": prompt_id(run, pending)}, {"$set": doc}, upsert=True)

    async def settle(self, run: RunKey, pending: PendingInput, status: PromptStatus) -> None:
        """Mark ``pending`` answered or expired."""
        await self.prompts.update_one(
            {"_id": prompt_id(run, pending)},
            {"$set": {"status": status.value, "closed_at": _now()}},
        )

    async def answered(self, record: PromptRecord) -> None:
        """Mark an open prompt answered (the gateway, once the run took the answer)."""
        if record.status is not PromptStatus.OPEN:
            return
        await self.prompts.update_one(
            {"order": record.order, "status": PromptStatus.OPEN.value},
            {"$set": {"status": PromptStatus.ANSWERED.value, "closed_at": _now()}},
        )

    async def close_run(self, workflow_id: str) -> int:
        """Close every prompt a finished run left open (it takes no answer any more).

        Returns:
            How many were open.
        """
        result = await self.prompts.update_many(
            {"workflow_id": workflow_id, "status": PromptStatus.OPEN.value},
            {"$set": {"status": PromptStatus.CLOSED.value, "closed_at": _now()}},
        )
        return result.modified_count

    async def runs_with_open_prompts(self, *, after: str | None, limit: int) -> list[str]:
        """Workflow ids that have an open prompt, in id order after ``after``.

        The closed-run sweep pages through them (``after``: the last id of the
        previous page) to close the prompts of runs Temporal closed without
        Spindle (``spindle.shared.temporal.closed_runs``).
        """
        query: dict[str, Any] = {"status": PromptStatus.OPEN.value}
        if after is not None:
            query["workflow_id"] = {"$gt": after}
        found = (
            self.prompts.find(query, {"workflow_id": 1}).sort("workflow_id", ASCENDING).limit(limit)
        )
        ids: list[str] = []
        async for doc in found:
            if not ids or ids[-1] != doc["workflow_id"]:  # a run's prompts are adjacent
                ids.append(str(doc["workflow_id"]))
        return ids

    async def prompt_for(self, workflow_id: str, node_id: str | None) -> PromptRecord | None:
        """The prompt an answer to run ``workflow_id`` is for, as recorded.

        The open prompt on ``node_id`` (None: the oldest open one); else, so that a
        late or duplicate answer is judged by the prompt it was meant for, the
        latest prompt on ``node_id`` (None: of the run) whatever its status.
        """
        found = [
            _record(doc)
            async for doc in self.prompts.find({"workflow_id": workflow_id}).sort(
                "order", ASCENDING
            )
        ]
        matching = [r for r in found if node_id is None or r.node_id == node_id]
        open_ones = [r for r in matching if r.status is PromptStatus.OPEN]
        if open_ones:
            return open_ones[0]
        return matching[-1] if matching else None

    async def inbox(
        self,
        tenant_id: str,
        *,
        user_id: str,
        roles: tuple[str, ...],
        run_control: bool,
        limit: int,
        after: str | None = None,
    ) -> list[PromptRecord]:
        """Open, unexpired prompts of the tenant the caller may answer, oldest first.

        Authorization and expiry are checked here rather than in the query: the
        rules (docs/operations/threat-model.md) stay in one place, ``may_answer``.
        """
        now = datetime.now(UTC)
        out: list[PromptRecord] = []
        cursor = after
        while len(out) < limit:
            query: dict[str, Any] = {"tenant_id": tenant_id, "status": PromptStatus.OPEN.value}
            if cursor is not None:
                query["order"] = {"$gt": cursor}
            found = self.prompts.find(query).sort("order", ASCENDING).limit(_INBOX_BATCH)
            batch = [doc async for doc in found]
            for doc in batch:
                record = _record(doc)
                if not record.expired(now) and record.may_answer(user_id, roles, run_control):
                    out.append(record)
                    if len(out) == limit:
                        break
            if len(batch) < _INBOX_BATCH:
                break
            cursor = str(batch[-1]["order"])
        return out

    # -- answer attempts -----------------------------------------------------

    async def record_attempt(self, attempt_id: str, attempt: AnswerAttempt) -> None:
        """Keep ``attempt`` under ``attempt_id`` (the same id twice: kept once)."""
        doc = attempt.model_dump(mode="python")
        doc["outcome"] = attempt.outcome.value
        await self.attempts.update_one({"_id": attempt_id}, {"$setOnInsert": doc}, upsert=True)

    async def attempts_of(self, workflow_id: str) -> list[dict[str, Any]]:
        """Every answer attempt on the run, oldest first (``at`` as ISO text)."""
        out = []
        async for doc in self.attempts.find({"workflow_id": workflow_id}).sort(
            [("at", ASCENDING), ("_id", ASCENDING)]
        ):
            doc.pop("_id", None)
            at = doc.get("at")
            if isinstance(at, datetime):
                doc["at"] = _utc(at).isoformat()
            out.append(doc)
        return out


def _record(doc: dict[str, Any]) -> PromptRecord:
    return PromptRecord.model_validate(doc)


def _now() -> datetime:
    return datetime.now(UTC)


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
