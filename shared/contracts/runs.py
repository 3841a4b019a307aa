"""Typed models in and out of the ``GraphRun`` workflow, its updates and queries.

The gateway starts workflows and talks to them by name with these models (it
never imports worker code); the worker's workflow is typed by the same models.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from spindle.shared.contracts.graph_spec import GraphSpec

GRAPH_RUN_WORKFLOW = "GraphRun"
USER_INPUT_UPDATE = "UserInput"
DESCRIBE_QUERY = "describe"


class NodeStatus(StrEnum):
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"


class RunStatus(StrEnum):
    RUNNING = "running"
    PAUSED = "paused"  # waiting on a human (HITL)
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"


class NodeReport(BaseModel):
    """What one node execution did (seed 004's node report)."""

    node_id: str
    node_type: str
    status: NodeStatus
    attempt: int = 1
    visit: int = 1
    started_at: str | None = None
    duration_ms: float = 0.0
    output_summary: str | None = None
    error: str | None = None


class PendingInput(BaseModel):
    """A HITL prompt the run is waiting on."""

    node_id: str
    prompt: str
    ui_schema: dict[str, Any]
    requested_at: str


class ReplayedNode(BaseModel):
    """A node's recorded outcome that a forked run reuses instead of running it."""

    output: Any = None
    meta: dict[str, Any] = Field(default_factory=dict, description="metadata it propagated")


class GraphRunInput(BaseModel):
    """Everything a run needs: the graph, its input and shared context."""

    graph: GraphSpec
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    tenant_id: str = "default"
    user_id: str | None = None
    stream_id: str | None = Field(
        None, description="message stream to post to; default: this workflow's id"
    )
    workstream_id: str = "main"
    replayed_outputs: dict[str, ReplayedNode] = Field(
        default_factory=dict,
        description="fork: node id → recorded outcome; these nodes complete without running",
    )
    fork_of: str | None = Field(None, description="fork: the workflow id whose outputs are reused")
    scheduled_by: str | None = Field(
        None,
        description=(
            "the schedule that started this run; such a run writes its own run document "
            "and stream metadata, which the gateway writes for the starts it makes"
        ),
    )


class GraphRunResult(BaseModel):
    status: RunStatus
    output: Any = None
    error: str | None = None
    node_reports: list[NodeReport] = Field(default_factory=list)


class UserInput(BaseModel):
    """A human's message or HITL answer (the seed-002 ``UserInput`` signal).

    ``message`` is the text a chat client sends; ``data`` is a structured answer
    for a prompt's uiSchema. When only ``message`` is given and the prompt asks
    for a single required string, the message fills that field.
    """

    model_config = ConfigDict(extra="ignore")

    message: str | None = Field(None, max_length=100_000)
    data: dict[str, Any] | None = None
    client_message_id: str | None = Field(None, max_length=200)
    metadata: dict[str, Any] | None = None
    node_id: str | None = Field(None, description="the prompt answered; default: the pending one")
    user_id: str | None = None


class SignalAck(BaseModel):
    """Reply to a signal route, as ``@vertesia/client`` expects."""

    status: Literal["accepted", "rejected"]
    message: str


class RunDescription(BaseModel):
    """The live state of a run, from the workflow's ``describe`` query."""

    status: RunStatus
    graph_name: str
    current_nodes: list[str] = Field(default_factory=list)
    pending_input: PendingInput | None = None
    node_reports: list[NodeReport] = Field(default_factory=list)
    output: Any = None
    error: str | None = None
