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

Interrupt and rollback end another run: the submitter must be that run's owner or
hold a run-control role (``SubmitRun.run_control``), as for ``POST …/cancel``;
else ``Forbidden`` (403) and nothing starts. A queued run is cancelled by
``cancel_queued_run``: it leaves the queue and never starts.
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
CANCEL_QUEUED_RUN_UPDATE = "cancel_queued_run"
INTERRUPT_RUN = "interrupt_run"
# Since this patch an interrupt is sent by the ``interrupt_run`` activity (which notes
# who ends the run, docs/protocols/outbound.md), no longer by the child handle.
INTERRUPT_ACTIVITY_PATCH = "conversation-interrupt-through-an-activity"

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
    user_id: str | None = Field(None, description="who submitted it (the run's owner)")
    canceled_by: str | None = Field(
        None, description="the user who cancelled it while it was queued (it never started)"
    )


class SubmitRun(BaseModel):
    """``submit_run``: a run for the conversation, with its busy-run policy."""

    workflow_id: str
    run_input: GraphRunInput
    if_busy: IfBusy = IfBusy.REJECT
    run_control: bool = Field(
        False,
        description="the submitter holds a run-control role: it may interrupt or roll back "
        "another user's run (else only its own)",
    )


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


class CancelQueuedRun(BaseModel):
    """``cancel_queued_run``: take a queued run out of the queue; it never starts."""

    workflow_id: str
    by: str = Field(description="the user who cancels it")
    reason: str | None = Field(None, max_length=1000)


class QueuedRunCanceled(BaseModel):
    """What ``cancel_queued_run`` found: the run's state after it (``canceled``: it left
    the queue now; ``running`` and the rest: it had started, cancel it as a run)."""

    workflow_id: str
    state: ConversationRunState | None = Field(
        None, description="None: the conversation does not know the run"
    )


class InterruptRun(BaseModel):
    """``interrupt_run``: cancel a conversation's running run for a later one."""

    workflow_id: str
    by: str = Field(description="the workflow id of the run that interrupts it")


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
