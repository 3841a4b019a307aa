"""Typed models in and out of the ``GraphRun`` workflow, its updates and queries.

The gateway starts workflows and talks to them by name with these models (it
never imports worker code); the worker's workflow is typed by the same models.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from spindle.shared.contracts.budgets import (
    RUN_DEADLINE_MAX_SECONDS,
    RUN_DEADLINE_MIN_SECONDS,
    BudgetCarry,
    BudgetState,
    ChildrenPolicy,
    RunBudget,
)
from spindle.shared.contracts.envelope import CarriedEnvelopes
from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.contracts.workstreams import CarriedWorkstream

GRAPH_RUN_WORKFLOW = "GraphRun"
USER_INPUT_UPDATE = "UserInput"
USER_MESSAGE_UPDATE = "user_message"
"""Update: a user message for the listening agent of the main workstream, or the answer to
the prompt that waits (docs/conversations.md, "Talking to a running agent")."""
COMPLETE_AGENT_UPDATE = "complete_agent"
"""Update: end the listening interactive agent (COMPLETE); the graph goes on."""
FILE_UPLOADED_SIGNAL = "FileUploaded"
"""Signal: a file was uploaded to the run (seed 002); the listening agent is told."""
DESCRIBE_QUERY = "describe"
PURE_NODES_LOCAL_PATCH = "pure-nodes-run-as-local-activities"
"""``workflow.patched`` id: a router or output node that does not say ``local`` runs as a
local activity (``NodeTypeSpec.local``); runs recorded before it scheduled them as
activities on the task queue, and replay so."""
FINISH_LOCAL_PATCH = "run-finishes-in-a-local-activity"
"""``workflow.patched`` id: ``finish_run`` is a local activity on the run's worker; runs
recorded before it scheduled it on the task queue, and replay so."""
ASK_SETTLES_ON_CANCEL_PATCH = "ask-settles-before-the-run-ends"
"""``workflow.patched`` id: a canceled run waits for its in-flight ``request_input`` to
end before finishing, so no prompt is posted or left open in an inbox after the run's
last message (runs recorded before it do not wait)."""
CANCEL_IN_ACTIVITY_PATCH = "a-cancel-met-in-an-activity-stops-the-run"
"""``workflow.patched`` id: a cancel that reaches the run while it awaits an activity of
its own (a WARNING notice, ``record_start``) stops the run by its cancel path; runs
recorded before it took a canceled notice for a failed post and went on."""
NODE_VISITS_PATCH = "no-hidden-cap-on-node-visits"
"""``workflow.patched`` id: a node without ``max_visits`` runs as often as its loops'
edges allow (bounded only by the run's ``max_node_visits`` setting, which fails the run);
runs recorded before it stopped such a node at 1,000 visits with a WARNING, and replay so."""


class NodeStatus(StrEnum):
    SUCCESS = "SUCCESS"
    FAILED = "FAILED"
    SKIPPED = "SKIPPED"  # the scheduler decided not to run it (output_summary says why)
    REUSED = "REUSED"  # a fork took the source run's output instead of running it


class RunStatus(StrEnum):
    QUEUED = "queued"  # submitted to a busy conversation, not started yet
    RUNNING = "running"
    PAUSED = "paused"  # waiting on a human (HITL), or at a budget cap
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELED = "canceled"
    TERMINATED = "terminated"
    TIMED_OUT = "timed_out"


#: The statuses of a run that has ended (its document says so once it is archived).
ENDED_STATUSES = frozenset(
    {
        RunStatus.COMPLETED.value,
        RunStatus.FAILED.value,
        RunStatus.CANCELED.value,
        RunStatus.TERMINATED.value,
        RunStatus.TIMED_OUT.value,
    }
)


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
    source_run: str | None = Field(
        None, description="REUSED: the run (workflow id) whose recorded output was reused"
    )
    child_state: str | None = Field(
        None, description="a workstream node: its child's state when the report was made"
    )


EXPIRY_USER = "system:expiry"
"""The ``user_id`` of an ``on_expiry`` answer, given by the run itself."""


class ExpiryAction(StrEnum):
    """What a prompt does when nobody answered before it expired."""

    ANSWER = "answer"  # accept the graph's default answer, as EXPIRY_USER
    FAIL = "fail"  # the node fails, and with it the run
    SKIP = "skip"  # the node is SKIPPED (output null, port "expired"); the run goes on


class PendingInput(BaseModel):
    """A HITL prompt the run is waiting on.

    ``assignees`` and ``roles`` say who may answer (docs/operations/threat-model.md):
    when either is set, only those users, users with one of those roles, or users
    with a run-control role; when neither is, the run's owner or a run-control role.
    """

    node_id: str
    prompt: str
    ui_schema: dict[str, Any]
    requested_at: str
    title: str | None = None
    visit: int = Field(1, description="the prompt node's execution this asks for")
    expires_at: str | None = Field(None, description="ISO time after which no answer is taken")
    on_expiry: ExpiryAction | None = Field(None, description="what happens at expires_at")
    expiry_answer: dict[str, Any] | None = Field(
        None, description="the answer taken at expiry when on_expiry is 'answer'"
    )
    assignees: list[str] = Field(default_factory=list, description="user ids who may answer")
    roles: list[str] = Field(default_factory=list, description="roles whose users may answer")
    on_cancel: str = Field(
        "cancel_run", description="what an abandoned prompt does: cancel_run or keep_waiting"
    )

    @property
    def assigned(self) -> bool:
        """Whether only named users or roles (and run-control roles) may answer."""
        return bool(self.assignees or self.roles)

    def assigned_to(self, user_id: str | None, roles: list[str] | tuple[str, ...]) -> bool:
        """Whether ``user_id`` is an assignee or has one of the assigned roles."""
        return (user_id is not None and user_id in self.assignees) or bool(
            set(roles) & set(self.roles)
        )

    def answerers(self) -> str:
        """Who may answer, for error messages."""
        named = [f"user {u}" for u in self.assignees] + [f"role {r}" for r in self.roles]
        return ", ".join(named) + " or a run-control role"


class ReplayedNode(BaseModel):
    """A node's recorded outcome that a forked run reuses instead of running it."""

    output: Any = None
    meta: dict[str, Any] = Field(default_factory=dict, description="metadata it propagated")


class SchedulerSnapshot(BaseModel):
    """The scheduler's state between generations of a run (continue-as-new)."""

    started: bool = False
    node_states: dict[str, str] = Field(default_factory=dict, description="node id → state")
    resolved: dict[str, bool | None] = Field(
        default_factory=dict, description="forward edge index → taken (None: undecided)"
    )
    visits: dict[str, int] = Field(default_factory=dict)
    traversals: dict[str, int] = Field(
        default_factory=dict, description="back-edge index → times taken in the current loop"
    )


class CarriedWait(BaseModel):
    """A prompt node that asked and waits for its answer across a continue-as-new."""

    visit: int
    started_at: str
    pending: PendingInput


class CarriedState(BaseModel):
    """What one generation of a run hands the next when it continues as new.

    See docs/graphs/index.md (long runs): the same workflow id, stream and archive
    records carry on; only Temporal's run id changes.
    """

    generation: int = Field(2, description="1 for the first run; +1 per continue-as-new")
    first_run_id: str = Field(description="Temporal run id of generation 1: archive/stream keys")
    scheduler: SchedulerSnapshot
    state: dict[str, Any] = Field(default_factory=dict, description="the run state values")
    output: Any = None
    output_node_ran: bool = False
    ready: list[tuple[str, int]] = Field(
        default_factory=list, description="(node id, visit) activated but not yet started"
    )
    waits: dict[str, CarriedWait] = Field(default_factory=dict, description="prompt node id → wait")
    reports: list[NodeReport] = Field(default_factory=list, description="the latest reports")
    report_counts: dict[str, int] = Field(default_factory=dict, description="status → count")
    notices: int = 0
    history_warned: bool = False
    workstream_counts: dict[str, int] = Field(
        default_factory=dict, description="workstream/steer/message ids handed out, by prefix"
    )
    workstreams: list[CarriedWorkstream] = Field(
        default_factory=list,
        description="the run's workstreams, running ones first-class (docs/graphs/long-runs.md)",
    )
    budget: BudgetCarry | None = Field(None, description="limits and spend so far (budgets)")
    deadline_at: str | None = Field(
        None, description="ISO 8601 workflow time the run's deadline falls (deadline_seconds)"
    )
    prompts_asked: bool = Field(
        True, description="an earlier generation asked a prompt (its records close at the end)"
    )
    agents: dict[str, CarriedAgent] = Field(
        default_factory=dict, description="agent node id → its session, waiting (IDLE)"
    )
    agent_posts: int = Field(0, description="run-level conversation posts so far (uploads)")
    decided: list[NodeReport] = Field(
        default_factory=list,
        description="the latest report of each node no activity archives (skipped, reused, "
        "workstream): finish_run archives them",
    )
    envelopes: CarriedEnvelopes | None = Field(
        None,
        description="envelopes on their way between nodes (docs/graphs/envelopes.md)",
        exclude_if=lambda value: value is None,
    )


class FileUploaded(BaseModel):
    """The ``FileUploaded`` signal: a file stored in the run's files."""

    name: str = Field(min_length=1, max_length=1024, description="its name in the run's files")
    content_type: str = Field("application/octet-stream", max_length=255)
    size: int = Field(0, ge=0, description="bytes")
    path: str = Field(
        "", max_length=2048, description="where the read_file tool finds it (its name)"
    )
    uploaded_by: str | None = None


class CompleteAgent(BaseModel):
    """The ``complete_agent`` update: end the listening interactive agent."""

    node_id: str | None = Field(None, description="the agent node; default: the listening one")
    user_id: str | None = Field(None, description="set by the gateway: who completes")


class CompleteAck(BaseModel):
    """Reply of ``POST /runs/{workflow_id}/complete``."""

    status: Literal["accepted"] = "accepted"
    node_id: str
    message: str


class CarriedAgent(BaseModel):
    """An agent node waiting (IDLE) across a continue-as-new: its conversation by
    reference (the loop id and how many of its messages are stored), never the list."""

    visit: int
    started_at: str
    loop_id: str = Field(description="the conversation's id in the conversation store")
    stored: int = Field(0, ge=0, description="messages of the conversation already stored")
    turn: int = Field(0, ge=0, description="LLM turns run so far (activity ids go on from it)")
    unsent: list[dict[str, Any]] = Field(
        default_factory=list, description="messages not stored yet (the last answer)"
    )
    answer: str = ""
    inbox: list[UserInput] = Field(default_factory=list, description="messages not yet taken")
    uploads: list[FileUploaded] = Field(default_factory=list, description="uploads not yet told")
    seen: list[str] = Field(default_factory=list, description="recent client_message_ids")
    idle_until: str | None = Field(None, description="ISO time the idle wait ends")
    idle_posted: bool = False
    completed: bool = False


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
    replay: ReplaySource | None = Field(
        None,
        description="fork: its lineage and the tools/llm replay modes (docs/replay-and-compare.md)",
        exclude_if=lambda value: value is None,
    )
    max_live_workstreams: int | None = Field(
        None,
        ge=1,
        description=(
            "workstreams the run may have running at once (the gateway sets the "
            "max_live_workstreams setting; None: the supervisor's default)"
        ),
    )
    continue_as_new_after_events: int | None = Field(
        None,
        ge=100,
        description="continue as new at a node boundary once history has this many events "
        "(besides when Temporal suggests it); default: only when suggested",
    )
    history_warning_events: int | None = Field(
        None,
        ge=100,
        description="post the history WARNING at this many events; default: half of "
        "Temporal's limit (25,000 events; 25 MB of history warns too)",
    )
    budget: RunBudget | None = Field(
        None, description="caps on LLM tokens, tool calls and cost (docs/graphs/budgets.md)"
    )
    shared_state_max_bytes: int | None = Field(
        None,
        ge=1024,
        description="most JSON bytes of shared state (and of context) after nodes' writes "
        "(the gateway sets the shared_state_max_bytes setting; None: its default)",
        exclude_if=lambda value: value is None,
    )
    expression_workflow_task_steps: int | None = Field(
        None,
        ge=1,
        description=(
            "evaluation steps the workflow's expressions may take together in one "
            "workflow task (the gateway sets the expression_workflow_task_steps "
            "setting; None: spindle.shared.graphs.expressions.DEFAULT_WORKFLOW_TASK_STEPS)"
        ),
    )
    deadline_seconds: int | None = Field(
        None,
        ge=RUN_DEADLINE_MIN_SECONDS,
        le=RUN_DEADLINE_MAX_SECONDS,
        description="the run stops (timed_out) this long after it started; bounds workstreams",
    )
    children_policy: ChildrenPolicy = Field(
        "cancel_children",
        description="on the run's cancel or deadline: stop running workstreams "
        "(cancel_children) or wait for them to end (let_finish)",
    )
    carried: CarriedState | None = Field(
        None, description="set by the run itself when it continues as new"
    )
    scheduled_by: str | None = Field(
        None,
        description=(
            "the schedule that started this run; such a run writes its own run document "
            "and stream metadata, which the gateway writes for the starts it makes"
        ),
    )
    max_node_visits: int | None = Field(
        None,
        ge=1,
        description="the most executions of any one node; past it the run fails "
        "(the gateway sets the max_node_visits setting; None: no cap)",
    )


class GraphRunResult(BaseModel):
    status: RunStatus
    output: Any = None
    error: str | None = None
    node_reports: list[NodeReport] = Field(
        default_factory=list, description="the latest reports (all of them: the archive)"
    )
    report_counts: dict[str, int] = Field(
        default_factory=dict, description="node executions by status, over the whole run"
    )
    generation: int = Field(1, description="runs of the continue-as-new chain so far")
    budget: BudgetState | None = Field(None, description="caps, spend, the cap reached")
    deadline_at: str | None = Field(None, description="ISO 8601: when the run's deadline falls")


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
    node_id: str | None = Field(
        None, description="the prompt answered (or agent node messaged); default: the pending one"
    )
    workstream_id: str | None = Field(
        None,
        max_length=200,
        description="a message for this workstream (an interactive one) instead of the main one",
    )
    user_id: str | None = Field(None, description="set by the gateway: who answers")
    roles: list[str] = Field(
        default_factory=list, description="set by the gateway: the answerer's roles"
    )
    run_control: bool = Field(
        False, description="set by the gateway: the answerer has a run-control role"
    )


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
    node_reports: list[NodeReport] = Field(
        default_factory=list, description="the latest reports (all of them: the archive)"
    )
    output: Any = None
    error: str | None = None
    report_counts: dict[str, int] = Field(
        default_factory=dict, description="node executions by status, over the whole run"
    )
    generation: int = Field(1, description="runs of the continue-as-new chain so far")
    budget: BudgetState | None = Field(None, description="caps, spend, the cap reached")
    deadline_at: str | None = Field(None, description="ISO 8601: when the run's deadline falls")
    awaiting_message: list[str] = Field(
        default_factory=list,
        description="interactive agents of the main workstream that answered and wait for "
        "the next user message (their IDLE names no child), by node id",
    )


# Defined before the models they name (UserInput, FileUploaded): resolved here.
CarriedAgent.model_rebuild()
CarriedState.model_rebuild()
GraphRunInput.model_rebuild()
