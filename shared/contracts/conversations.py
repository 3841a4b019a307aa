"""Conversations: runs of one conversation, one at a time, under a busy-run policy.

A run may belong to a ``conversation_id`` (``POST /runs``). The runs of a
conversation are serialized by one Temporal workflow per conversation
(``Conversation``, id ``conversation_workflow_id(tenant, conversation)``) that
starts each run as a child ``GraphRun`` in order. The gateway hands it a run with
update-with-start, so "is a run going?" is answered by the one workflow, whichever
gateway process asks (docs/conversations.md). What happens when one is:

- ``reject``: refused (``ConversationBusy``, 409, naming the running run);
- ``enqueue``: starts once the runs before it have ended, in order;
- ``interrupt``: the running run is cancelled (gracefully, as ``POST …/cancel``),
  then the new one starts;
- ``rollback``: the running run is terminated and left out of the
  conversation's history, then the new one starts.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, Field

from spindle.shared.contracts.runs import GraphRunInput

CONVERSATION_WORKFLOW = "Conversation"
SUBMIT_RUN_UPDATE = "submit_run"
CONVERSATION_RUNS_QUERY = "conversation_runs"
CONVERSATION_RUN_STARTED = "conversation_run_started"
ROLL_BACK_RUN = "roll_back_run"

CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
# Runs a conversation lists (the newest); older ones stay in the archive.
CONVERSATION_RUNS_KEPT = 200


def conversation_workflow_id(tenant_id: str, conversation_id: str) -> str:
    """The ``Conversation`` workflow id of a tenant's conversation.

    Derived from both, so another tenant's conversation of the same name is
    another workflow (tenant isolation: an unknown conversation to that tenant),
    and hashed, so the id names neither.
    """
    digest = hashlib.sha256(f"{tenant_id}\0{conversation_id}".encode()).hexdigest()
    return f"conversation-{digest[:32]}"


class IfBusy(StrEnum):
    """What a start does when its conversation has a run going."""

    REJECT = "reject"
    ENQUEUE = "enqueue"
    INTERRUPT = "interrupt"
    ROLLBACK = "rollback"


class ConversationRunState(StrEnum):
    """Where one run of a conversation is."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    INTERRUPTED = "interrupted"  # cancelled by a later run's ``interrupt``
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"
    ROLLED_BACK = "rolled_back"  # terminated by a later run's ``rollback``


class ConversationInput(BaseModel):
    """The ``Conversation`` workflow's input (and what it carries when it continues as new)."""

    tenant_id: str
    conversation_id: str
    task_queue: str = Field(description="the queue its runs (child GraphRuns) run on")
    runs: list[ConversationRun] = Field(default_factory=list)
    pending: list[SubmitRun] = Field(default_factory=list, description="queued runs, in order")


class ConversationRun(BaseModel):
    """One run of a conversation, as ``GET /conversations/{id}/runs`` lists it."""

    workflow_id: str
    run_id: str | None = None
    graph: str
    if_busy: IfBusy
    state: ConversationRunState = ConversationRunState.QUEUED
    in_history: bool = Field(
        True, description="False for a rolled-back run: the conversation's history leaves it out"
    )
    submitted_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    ended_by: str | None = Field(
        None, description="the run whose interrupt or rollback ended this one"
    )


class SubmitRun(BaseModel):
    """``submit_run``: a run for the conversation, with its busy-run policy."""

    workflow_id: str
    run_input: GraphRunInput
    if_busy: IfBusy = IfBusy.REJECT


class SubmitAck(BaseModel):
    """How a submitted run was taken: started at once (with its run id) or queued."""

    workflow_id: str
    run_id: str | None = None
    state: ConversationRunState
    position: int = Field(0, description="runs ahead of it (0: started, or next)")
    current: str | None = Field(None, description="the run going when it was submitted")


class ConversationRuns(BaseModel):
    """``conversation_runs``: every run of the conversation, oldest first."""

    conversation_id: str
    current: str | None = Field(None, description="the run going now")
    runs: list[ConversationRun]
    history: list[str] = Field(
        description="workflow ids of the runs in the conversation's history (rolled-back "
        "runs left out), oldest first"
    )


class RunStartedInConversation(BaseModel):
    """``conversation_run_started``: record a child run's run id and that it runs."""

    workflow_id: str
    run_id: str
    conversation_id: str


class RollBackRun(BaseModel):
    """``roll_back_run``: terminate a conversation's running run for a later one."""

    workflow_id: str
    by: str = Field(description="the workflow id of the run that rolled it back")


ConversationInput.model_rebuild()
