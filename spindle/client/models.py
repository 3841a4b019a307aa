"""What the gateway answers, as typed models for SDK users.

They mirror the gateway's response bodies and ignore fields they do not know,
so a newer gateway does not break an older client. Request and answer bodies
that the gateway and the worker already share (``UserInput``, ``SignalAck``,
the workstream models) are re-used from ``shared`` as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from spindle.shared.contracts.budgets import BudgetState
from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.messages import (
    AgentMessage,
    AgentMessageType,
    CompactMessage,
    to_agent_message,
)
from spindle.shared.contracts.run_end import EndedBy
from spindle.shared.contracts.runs import NodeReport, PendingInput


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class WebhookCreated(_Answer):
    """The completion webhook a run was started with, and the secret that signs
    its POSTs (generated when the request gave none; shown only here)."""

    url: str
    events: list[str]
    secret: str


class StartedRun(_Answer):
    """``POST /runs``: the new run and where to watch it.

    Attributes:
        state: ``started``, or ``queued`` when its conversation has a run going
            (it starts after that one).
        position: when queued, how many runs of the conversation start before it.
    """

    workflow_id: str
    run_id: str
    stream_url: str
    updates_url: str
    status_url: str
    temporal_ui_url: str | None = None
    webhook: WebhookCreated | None = None
    conversation_id: str | None = None
    state: str = "started"
    position: int | None = None


class RunSummary(_Answer):
    """One run in ``GET /runs``, as the archive keeps it.

    Attributes:
        current_node_id: the node the run is at (``currentNodeId`` on the wire).
        trace: where the run's NodeMessages are kept.
        trace_id: the run's trace id (``traceId``); None when tracing was off.
        traceparent: the W3C trace context the run was started in.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    workflow_id: str
    run_id: str
    tenant_id: str | None = None
    user_id: str | None = None
    graph_name: str | None = None
    status: str
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    output: Any = None
    error: str | None = None
    ended_by: dict[str, Any] | None = None
    """Who or what ended a run that did not complete (``EndedBy`` as stored)."""
    current_nodes: list[str] = Field(default_factory=list)
    pending_input: dict[str, Any] | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    temporal_ui_url: str | None = None
    current_node_id: str | None = Field(None, alias="currentNodeId")
    trace: dict[str, Any] = Field(default_factory=dict)
    trace_id: str | None = Field(None, alias="traceId")
    traceparent: str | None = None
    generations: int | None = None
    """Runs of its continue-as-new chain, recorded when it ended."""
    node_counts: dict[str, int] | None = None
    """Node executions by status over the whole run, recorded when it ended."""
    budget: dict[str, Any] | None = None
    """The run's budget (limits, usage, exhausted) as recorded when it ended."""
    conversation_id: str | None = None
    """The conversation the run belongs to; None: of none (or archived before it was kept)."""
    forked_from: dict[str, Any] | None = None
    """A fork's lineage (source ``workflow_id``, ``from_node``, ``overrides``, ``graph``, ...)."""


class RunPage(_Answer):
    """A page of ``GET /runs``, newest first."""

    runs: list[RunSummary]
    total: int
    limit: int
    offset: int


class HistoryBudget(_Answer):
    """How much of Temporal's history limits a run's current execution uses.

    Attributes:
        events: history length; None once Temporal no longer has the run.
        bytes: history size; None once Temporal no longer has the run.
        used: the larger of events/events_limit and bytes/bytes_limit.
        generations: runs of the continue-as-new chain (1: never continued); None
            when nothing recorded it.
    """

    events: int | None = None
    bytes: int | None = None
    events_limit: int
    bytes_limit: int
    used: float | None = None
    generations: int | None = None


class RunInfo(_Answer):
    """``GET /runs/{workflowId}``: status, current nodes, pending input, node reports.

    Attributes:
        budget: the run's budget and what it has used; None without a budget.
        deadline_at: when the run's deadline falls (ISO 8601); None without one.
        history: its Temporal history size against the limits, and its
            generations (also after Temporal forgot the run, from the archive).
        node_counts: node executions by status over the whole run.
    """

    workflow_id: str
    run_id: str | None = None
    graph_name: str | None = None
    tenant_id: str | None = None
    status: str
    temporal_status: str | None = None
    current_nodes: list[str] = Field(default_factory=list)
    pending_input: PendingInput | None = None
    node_reports: list[NodeReport] = Field(default_factory=list)
    node_counts: dict[str, int] | None = None
    input: Any = None
    context: dict[str, Any] | None = None
    output: Any = None
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    budget: BudgetState | None = None
    deadline_at: str | None = None
    awaiting_message: list[str] = Field(default_factory=list)
    """Interactive agents (node ids) that answered and wait for the next user message."""
    ended_by: EndedBy | None = None
    """Who or what ended a run that did not complete, and why."""
    history: HistoryBudget | None = None
    forked_from: ReplaySource | None = None
    """A fork: the run it came from, from_node, overrides, graph, replay modes."""
    temporal_ui_url: str | None = None
    stream_url: str | None = None
    updates_url: str | None = None


class ArchivedNodeReport(NodeReport):
    """One node execution as the archive keeps it: the report, its input and output.

    Fields a newer gateway adds are kept (not dropped), so printing a report
    shows all the archive holds.
    """

    model_config = ConfigDict(extra="allow")

    workflow_id: str | None = None
    input: Any = None
    output: Any = None
    recorded_at: datetime | None = None


class RunBundle(_Answer):
    """``GET /runs/{workflowId}/bundle``: everything about one run, in one document.

    Attributes:
        run: the run as ``GET /runs/{workflowId}`` describes it.
        messages: its stored messages, compact JSON (``t``, ``m``, ``d``, ``ts``, ...).
        node_reports: the archived node reports in execution order, with inputs
            and outputs (empty when the gateway runs without an archive).
        history: the Temporal event histories, one per generation of a run that
            continued as new, oldest first: ``{"run_id", "events"}`` each (Temporal's
            history JSON plus its run id); empty once Temporal dropped the run.
        trace: the run's NodeMessages, in order.
        trace_ids: ``run`` (the run's trace id) and ``messages`` (``seq``,
            ``traceId``, ``spanId`` per message); empty when tracing was off.
        answer_attempts: every answer attempt on the run's prompts (``user_id``,
            ``at``, ``outcome``, ``node_id``, ``detail``).
    """

    run: RunInfo
    messages: list[dict[str, Any]] = Field(default_factory=list)
    node_reports: list[ArchivedNodeReport] = Field(default_factory=list)
    history: list[dict[str, Any]] = Field(default_factory=list)
    trace: list[dict[str, Any]] = Field(default_factory=list)
    trace_ids: dict[str, Any] = Field(default_factory=dict)
    answer_attempts: list[dict[str, Any]] = Field(default_factory=list)


class Accepted(_Answer):
    """A cancel or terminate request the gateway took."""

    status: str
    message: str
    workflow_id: str


class UploadedFile(_Answer):
    """A file stored with a run."""

    file_id: str
    tenant_id: str | None = None
    workflow_id: str
    name: str
    content_type: str
    size: int
    sha256: str
    uploaded_by: str | None = None
    uploaded_at: datetime | None = None


class StreamToken(_Answer):
    """A short-lived read-only token for one run's stream (for ``EventSource``)."""

    access_token: str
    expires_at: datetime
    stream_url: str


RunRef = StartedRun | RunInfo | RunSummary | str
"""A run: a model the SDK returned, or a workflow id."""

LATEST_RUN = "latest"


def run_ids(run: RunRef) -> tuple[str, str]:
    """``(workflow_id, run_id)`` of a run reference.

    A bare workflow id addresses the run's current execution (the gateway serves
    per-run routes by workflow id).
    """
    if isinstance(run, str):
        return run, LATEST_RUN
    return run.workflow_id, run.run_id or LATEST_RUN


@dataclass(frozen=True)
class StreamedMessage:
    """One message of a run's stream, in both formats.

    Attributes:
        compact: the wire form (``t``, ``m``, ``w``, ``d``, ``f``, ``ts``, ``i``).
        message: the readable ``AgentMessage`` form.
        seq: the message's sequence number in its run (the SSE id); None for
            messages of the phase-1 history, which carries none.
        replayed: True for messages of the phase-1 history, False for live ones.
    """

    compact: CompactMessage
    message: AgentMessage
    seq: int | None = None
    replayed: bool = False

    @classmethod
    def of(
        cls, compact: CompactMessage, run_id: str, *, seq: int | None, replayed: bool
    ) -> StreamedMessage:
        """Wrap a wire message, converting it for ``message``."""
        return cls(compact, to_agent_message(compact, run_id), seq, replayed)

    @property
    def type(self) -> AgentMessageType:
        return self.compact.t

    @property
    def text(self) -> str:
        return self.compact.m or ""

    @property
    def details(self) -> Any:
        return self.compact.d

    @property
    def ts(self) -> int | None:
        return self.compact.ts

    @property
    def workstream(self) -> str:
        """The workstream that posted it (``main`` for the run itself)."""
        return self.compact.workstream

    @property
    def activity_id(self) -> str | None:
        return self.compact.i

    @property
    def ends_conversation(self) -> bool:
        """True for the main workstream's COMPLETE or TERMINATED: the last message."""
        return self.compact.ends_conversation
