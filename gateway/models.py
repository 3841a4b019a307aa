"""Request and response bodies of the REST routes (all pydantic, all in OpenAPI)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from spindle.shared.contracts.budgets import (
    RUN_DEADLINE_MAX_SECONDS,
    RUN_DEADLINE_MIN_SECONDS,
    BudgetState,
    ChildrenPolicy,
    RunBudget,
)
from spindle.shared.contracts.conversations import (
    CONVERSATION_ID_PATTERN,
    ConversationRuns,
    IfBusy,
)
from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.run_end import EndedBy
from spindle.shared.contracts.runs import NodeReport, PendingInput
from spindle.shared.platform.webhook_signature import secret_key
from spindle.shared.store.archive import RunRecord
from spindle.shared.tasks.webhooks import WEBHOOK_EVENTS, WebhookEvent


class RunWebhook(BaseModel):
    """Where to POST the run's completion, failure or question (docs/protocols/outbound.md
    "Completion webhooks"); signed per the Standard Webhooks convention."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        min_length=1,
        max_length=2048,
        pattern=r"^https?://",
        description="an absolute http(s) URL the outbound policy allows",
    )
    events: list[WebhookEvent] = Field(
        default_factory=lambda: list(WEBHOOK_EVENTS),  # type: ignore[arg-type]
        min_length=1,
        max_length=len(WEBHOOK_EVENTS),
        description="which events to send (default: all)",
    )
    secret: str | None = Field(
        None,
        max_length=200,
        description="your signing secret (whsec_ + base64 of 24-64 bytes); when left out, "
        "one is generated and returned once, in this request's response",
    )

    @field_validator("secret")
    @classmethod
    def _secret_is_whsec(cls, value: str | None) -> str | None:
        if value is not None:
            secret_key(value)  # ValueError → 422 naming webhook.secret
        return value


class WebhookCreated(BaseModel):
    """The run's webhook as registered. ``secret`` is shown in full once, when the
    gateway generated it; a secret you gave (or a replayed start) shows masked."""

    url: str
    events: list[WebhookEvent]
    secret: str


class StartRunRequest(BaseModel):
    """Start a graph run: a registered graph by name, or an inline spec."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"graph": "approval-flow", "input": {"topic": "Q3 budget"}},
            ]
        },
    )

    graph: str | None = Field(
        None, min_length=1, max_length=128, description="name of a registered graph"
    )
    graph_spec: dict[str, Any] | None = Field(
        None, description="an inline graph spec (JSON Schema at GET /graphs/schema)"
    )
    input: Any = Field(None, description="run input, checked against the graph's input_schema")
    context: dict[str, Any] = Field(default_factory=dict, description="shared run context")
    meta: dict[str, Any] = Field(
        default_factory=dict, description="metadata propagated from node to node"
    )
    budget: RunBudget | None = Field(
        None,
        description="caps on LLM tokens, tool calls and cost; at one the run pauses "
        "(or fails) before its next LLM turn or tool call",
    )
    deadline_seconds: int | None = Field(
        None,
        ge=RUN_DEADLINE_MIN_SECONDS,
        le=RUN_DEADLINE_MAX_SECONDS,
        description="the run stops (timed_out) this long after it started; "
        "its workstreams' deadlines never pass it",
    )
    children_policy: ChildrenPolicy = Field(
        "cancel_children",
        description="on the run's cancel or deadline: stop its running workstreams "
        "(cancel_children) or let them finish first (let_finish)",
    )
    webhook: RunWebhook | None = Field(
        None, description="POST the run's completion, failure or question to this URL"
    )

    # Busy-run policies (docs/conversations.md).
    conversation_id: str | None = Field(
        None,
        pattern=CONVERSATION_ID_PATTERN,
        description="the conversation the run belongs to: its runs run one at a time",
    )
    if_busy: IfBusy | None = Field(
        None,
        description="when the conversation has a run going: reject (409, the default), "
        "enqueue (start after it, in order), interrupt (cancel it gracefully, then start) "
        "or rollback (terminate it, leave it out of the conversation's history, then start)",
    )

    @field_validator("if_busy")
    @classmethod
    def _if_busy_needs_a_conversation(
        cls, value: IfBusy | None, info: ValidationInfo
    ) -> IfBusy | None:
        if value is not None and info.data.get("conversation_id") is None:
            raise ValueError("if_busy applies to a run of a conversation: give conversation_id")
        return value

    @model_validator(mode="after")
    def _exactly_one_graph(self) -> StartRunRequest:
        if (self.graph is None) == (self.graph_spec is None):
            raise ValueError("give exactly one of 'graph' (a registered name) or 'graph_spec'")
        return self


class StartRunResponse(BaseModel):
    """Where to follow the run that was just started."""

    workflow_id: str
    run_id: str
    stream_url: str = Field(description="SSE stream of the run's messages")
    updates_url: str = Field(description="the run's message history (gzip JSON)")
    status_url: str
    temporal_ui_url: str
    webhook: WebhookCreated | None = None
    conversation_id: str | None = Field(None, description="the conversation of the run")
    state: Literal["started", "queued"] = Field(
        "started", description="queued: its conversation has a run going; it starts after"
    )
    position: int | None = Field(
        None, description="queued: how many runs of the conversation start before it"
    )


class ConversationRunList(ConversationRuns):
    """``GET /conversations/{id}/runs``: the conversation's runs, oldest first."""


class RunList(BaseModel):
    runs: list[RunRecord]
    total: int
    limit: int
    offset: int


class HistoryBudget(BaseModel):
    """The Temporal history of a run's current execution, against Temporal's limits.

    A run that continues as new starts a fresh history: these are the numbers of
    its latest execution.
    """

    events: int | None = Field(
        description="history length (events), from Temporal's describe; None once Temporal "
        "no longer has the run"
    )
    bytes: int | None = Field(
        description="history size (bytes), from Temporal's describe; None once Temporal "
        "no longer has the run"
    )
    events_limit: int = Field(description="Temporal's default hard limit on events")
    bytes_limit: int = Field(description="Temporal's default hard limit on bytes")
    used: float | None = Field(
        description="the larger of events/events_limit and bytes/bytes_limit"
    )
    generations: int | None = Field(
        None,
        description="runs of the continue-as-new chain so far (1: it never continued as new); "
        "kept after the end; None when nothing recorded it (runs from before it was recorded)",
    )


class RunDetail(BaseModel):
    """A run as Temporal, the running workflow and the archive know it."""

    workflow_id: str
    run_id: str | None = None
    graph_name: str | None = None
    tenant_id: str | None = None
    status: str = Field(description="running, paused, completed, failed, canceled, ...")
    temporal_status: str | None = Field(None, description="Temporal's execution status")
    current_nodes: list[str] = Field(default_factory=list)
    pending_input: PendingInput | None = None
    node_reports: list[NodeReport] = Field(default_factory=list)
    node_counts: dict[str, int] | None = Field(
        None,
        description="node executions by status (SUCCESS, FAILED, SKIPPED, REUSED) over the "
        "whole run, live and after the end; node_reports holds the latest only",
    )
    input: Any = None
    context: dict[str, Any] | None = None
    output: Any = Field(
        None,
        description="the run's output once it has ended; null while it runs, waits at a "
        "prompt or is paused (a node's output so far is in node_reports and the bundle)",
    )
    error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    closed_at: datetime | None = None
    budget: BudgetState | None = Field(
        None, description="the run's caps, spend (workstreams included) and the cap reached"
    )
    deadline_at: str | None = Field(None, description="when the run's deadline falls (ISO 8601)")
    awaiting_message: list[str] = Field(
        default_factory=list,
        description="interactive agents (node ids) of the main workstream that answered and "
        "wait for the next user message, as the running workflow says; empty once it ended",
    )
    ended_by: EndedBy | None = Field(
        None,
        description="who or what ended a run that did not complete (a user, the run that "
        "interrupted or rolled it back, a Temporal operator, its deadline, its budget); "
        "error holds the reason in a sentence",
    )
    history: HistoryBudget | None = Field(
        None, description="how much of Temporal's history limits the run's execution uses"
    )
    forked_from: ReplaySource | None = Field(
        None,
        description="a fork: the run it came from, from_node, overrides, graph and replay "
        "modes (docs/replay-and-compare.md)",
    )
    temporal_ui_url: str | None = None
    stream_url: str | None = None
    updates_url: str | None = None


class Accepted(BaseModel):
    """An operation was accepted and will happen asynchronously."""

    status: Literal["accepted"] = "accepted"
    message: str
    workflow_id: str


class MessagesPage(BaseModel):
    """The stored messages of a run (compact wire format, seed 002)."""

    messages: list[dict[str, Any]] = Field(
        description="CompactMessage objects: t, m?, w?, d?, f?, ts, i?"
    )


class GraphSummary(BaseModel):
    name: str
    version: str
    description: str
    entry: str
    node_count: int
    node_types: list[str]


class GraphList(BaseModel):
    graphs: list[GraphSummary]


class HealthStatus(BaseModel):
    status: Literal["ok"] = "ok"


class CheckResult(BaseModel):
    ok: bool
    latency_ms: float
    detail: str | None = None


class ReadyStatus(BaseModel):
    status: Literal["ready", "unavailable"]
    checks: dict[str, CheckResult] = Field(
        default_factory=dict,
        description="per dependency; empty unless the caller is authenticated",
    )


class Problem(BaseModel):
    """An error, as RFC 9457 problem details (``application/problem+json``)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field("about:blank", description="always about:blank: the status says it all")
    title: str = Field(description="the kind of error, e.g. 'Validation failed'")
    status: int = Field(ge=400, le=599, description="the HTTP status, repeated")
    detail: str = Field(description="what is wrong, naming the field, node and rule")
    instance: str | None = Field(None, description="the request path")
    errors: list[dict[str, Any]] | None = Field(
        None,
        description=(
            "one entry per problem: where (`in`: body, query, path, header), `field`, "
            "`node` for graphs, `rule` broken and `message`"
        ),
    )


# One Server-Sent Event of a run's stream, as OpenAPI 3.1 documents the items of
# ``text/event-stream`` (the routes' `content` entry uses it as the schema).
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "description": "one CompactMessage as JSON: t, m?, w?, d?, f?, ts, i?",
        },
        "id": {"type": "string", "description": "the message's sequence number in its run"},
        "event": {"type": "string", "description": "absent (the default 'message' event)"},
        "retry": {"type": "integer", "description": "reconnection delay, in milliseconds"},
    },
    "required": ["data"],
}
