"""Workstreams (seed 002, docs/design.md §5): child runs a parent launches, watches and steers.

CONTRACT shared by the parent workflow (``GraphRun``), the child workflow
(``Workstream``), the gateway and the tests. Keep these names and semantics.

A workstream is a child workflow started without waiting. It posts to the
parent's message stream with its own ``workstream_id`` (the compact ``w``
field), so one SSE connection shows the whole tree. Parent and child talk only
through signals:

    gateway ──update LaunchWorkstream / SteerWorkstream / MessageWorkstream /
              TerminateWorkstream──► GraphRun (parent)
    GraphRun ──signal Steer / Message / Stop──► Workstream (child)
    Workstream ──signal WorkstreamProgress──► GraphRun
    Workstream ──signal WorkstreamEnded (its WorkstreamOutcome)──► GraphRun
    Workstream ──returns WorkstreamOutcome──► GraphRun (awaits the child handle)

The parent signals go to the parent's workflow id, so they reach whichever
generation of a parent that continued as new is current; a generation that
took children over from the one before learns their end from ``WorkstreamEnded``
(docs/graphs/long-runs.md).

Ids: ``launch_id`` = ``workstream_id`` = ``ws-<n>`` (n counts launches of one
parent run from 1); the child's workflow id is ``<parent workflow id>.<launch_id>``.

Deadline (parent-side timers, deterministic): WARNING to the parent's main
stream at 75 % and 90 %; a wrap-up ``add_instruction`` steer (origin
``deadline``) to the child at 80 %; at 100 % the state becomes ``canceling``
and the child gets ``Stop(reason="timeout")`` (graceful: it ends after its
current step with a partial result); after ``GRACE_SECONDS`` without an end the
parent cancels the child workflow (forced). The parent then posts a SYSTEM
message (main) with the timeout and whatever partial result exists.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from spindle.shared.contracts.budgets import BudgetLimits, BudgetUsage
from spindle.shared.contracts.errors import (
    InvalidSteer,
    RunFinishing,
    UnknownWorkstream,
    WorkstreamFinished,
    WorkstreamNotInteractive,
    WorkstreamStartFailed,
)
from spindle.shared.contracts.forks import CallReplay
from spindle.shared.contracts.memory import ContextPolicy

WORKSTREAM_WORKFLOW = "Workstream"

# Parent (GraphRun) updates and query, called by the gateway.
LAUNCH_WORKSTREAM_UPDATE = "LaunchWorkstream"
STEER_WORKSTREAM_UPDATE = "SteerWorkstream"
MESSAGE_WORKSTREAM_UPDATE = "MessageWorkstream"
TERMINATE_WORKSTREAM_UPDATE = "TerminateWorkstream"
WORKSTREAMS_QUERY = "workstreams"

# Child → parent.
WORKSTREAM_PROGRESS_SIGNAL = "WorkstreamProgress"
WORKSTREAM_ENDED_SIGNAL = "WorkstreamEnded"

#: ``workflow.patched`` id: children started ABANDON and carried over when the
#: parent continues as new; they signal ``WorkstreamEnded`` at their end.
WORKSTREAMS_CARRIED_PATCH = "workstreams-carried-across-continue-as-new"

# Parent → child, and the child's own query.
CHILD_STEER_SIGNAL = "Steer"
CHILD_MESSAGE_SIGNAL = "Message"
CHILD_STOP_SIGNAL = "Stop"
CHILD_STATE_QUERY = "state"

# Deadlines, seconds (seed 002).
DEADLINE_DEFAULT_SECONDS = 300
DEADLINE_MIN_SECONDS = 30
DEADLINE_MAX_SECONDS = 1800
GRACE_SECONDS = 60
WARN_AT = (0.75, 0.90)
WRAP_UP_AT = 0.80
WRAP_UP_TEXT = (
    "80% of your deadline has passed: wrap up now. Stop exploring, use what you "
    "have, and give your best final answer at the next step."
)

# ApplicationError types the parent's update validators raise: declared (with
# their HTTP status) by the classes of ``spindle.shared.contracts.errors``.
UNKNOWN_WORKSTREAM = UnknownWorkstream.application_type
WORKSTREAM_FINISHED = WorkstreamFinished.application_type
WORKSTREAM_NOT_INTERACTIVE = WorkstreamNotInteractive.application_type
INVALID_STEER = InvalidSteer.application_type
WORKSTREAM_START_FAILED = WorkstreamStartFailed.application_type
RUN_FINISHING = RunFinishing.application_type

# In-workflow tools an ``agent`` node may list in ``params.tools``; GraphRun
# answers them itself (no ``tool_call`` activity).
LAUNCH_WORKSTREAM_TOOL = "launch_workstream"
STEER_WORKSTREAM_TOOL = "steer_workstream"
MESSAGE_WORKSTREAM_TOOL = "message_workstream"
TERMINATE_WORKSTREAM_TOOL = "terminate_workstream"
WAIT_WORKSTREAMS_TOOL = "wait_workstreams"
WORKSTREAM_TOOLS = frozenset(
    {
        LAUNCH_WORKSTREAM_TOOL,
        STEER_WORKSTREAM_TOOL,
        MESSAGE_WORKSTREAM_TOOL,
        TERMINATE_WORKSTREAM_TOOL,
        WAIT_WORKSTREAMS_TOOL,
    }
)

#: How the report of an ended workstream given to its launching agent begins (a
#: ``system`` message), so a model tells a child's result from its instructions.
WORKSTREAM_REPORT_PREFIX = "[workstream result]"

#: Longest ``timeout_seconds`` of ``wait_workstreams``: a child's longest deadline
#: plus its grace period (a non-interactive child has ended by then).
WAIT_MAX_SECONDS = DEADLINE_MAX_SECONDS + GRACE_SECONDS


class WorkstreamState(StrEnum):
    RUNNING = "running"
    CANCELING = "canceling"
    COMPLETED = "completed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELED = "canceled"

    @property
    def finished(self) -> bool:
        return self not in (WorkstreamState.RUNNING, WorkstreamState.CANCELING)


class WorkstreamPhase(StrEnum):
    PLANNING = "planning"
    EXECUTING_TOOL = "executing_tool"
    SYNTHESIZING = "synthesizing"
    BLOCKED = "blocked"  # paused, or an interactive workstream waiting for a message
    DONE = "done"


class SteerCommand(StrEnum):
    ADD_INSTRUCTION = "add_instruction"
    SET_PRIORITY = "set_priority"
    ADD_CONSTRAINT = "add_constraint"
    PAUSE_REQUESTED = "pause_requested"
    RESUME_REQUESTED = "resume_requested"


TEXT_COMMANDS = (
    SteerCommand.ADD_INSTRUCTION,
    SteerCommand.SET_PRIORITY,
    SteerCommand.ADD_CONSTRAINT,
)


class WorkstreamAgent(BaseModel):
    """How the child's agent works (like an ``agent`` node's params)."""

    model_config = {"extra": "forbid"}

    system: str | None = Field(None, max_length=20_000, description="system prompt")
    tools: list[str] = Field(default_factory=list, max_length=50, description="tool names")
    max_turns: int = Field(8, ge=1, le=100, description="LLM turns per task or message")
    model: str | None = Field(None, max_length=200)
    context: ContextPolicy | None = Field(
        None,
        description="what the model is given per turn (max_tokens, strategy), as an agent "
        "node's params.context; default: the agent_context_* settings",
    )


class LaunchRequest(BaseModel):
    """Launch a workstream (REST body, ``launch_workstream`` tool, ``workstream`` node)."""

    model_config = {"extra": "forbid"}

    task: str = Field(min_length=1, max_length=20_000, description="what the child must do")
    deadline_seconds: int = Field(
        DEADLINE_DEFAULT_SECONDS,
        ge=DEADLINE_MIN_SECONDS,
        le=DEADLINE_MAX_SECONDS,
        description=f"{DEADLINE_MIN_SECONDS}..{DEADLINE_MAX_SECONDS} s",
    )
    interactive: bool = Field(
        False, description="after its task, wait for messages; ends only when terminated"
    )
    merge_child_artifacts: bool = Field(
        True, description="copy the child's out/ and files/ artifacts to files/<launch_id>/"
    )
    label: str | None = Field(None, max_length=200)
    agent: WorkstreamAgent = Field(default_factory=WorkstreamAgent)
    budget: BudgetLimits | None = Field(
        None,
        description="the child's own caps, reserved from the parent run's remaining budget; "
        "at one the child stops with its best answer (failed, naming the limit)",
    )

    @field_validator("deadline_seconds", mode="wrap")
    @classmethod
    def _deadline_names_both_bounds(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        # pydantic's own message names one bound; a caller needs both.
        try:
            return handler(value)
        except ValidationError as exc:
            kind = exc.errors()[0]["type"]
            if kind not in ("greater_than_equal", "less_than_equal"):
                raise
            raise PydanticCustomError(
                kind,
                "must be between {min} and {max} seconds; got {got}",
                {"min": DEADLINE_MIN_SECONDS, "max": DEADLINE_MAX_SECONDS, "got": value},
            ) from None


class LaunchAck(BaseModel):
    launch_id: str
    workstream_id: str
    child_workflow_id: str
    deadline_seconds: int
    deadline_at: str = Field(description="ISO 8601 (workflow time)")


class SteerRequest(BaseModel):
    model_config = {"extra": "forbid"}

    command: SteerCommand
    text: str | None = Field(
        None,
        max_length=10_000,
        description="required for add_instruction, set_priority, add_constraint",
    )

    @model_validator(mode="after")
    def _text_when_needed(self) -> SteerRequest:
        if self.command in TEXT_COMMANDS and not (self.text and self.text.strip()):
            raise ValueError(f"'{self.command.value}' needs a non-empty 'text'")
        return self


class SteerAck(BaseModel):
    steer_id: str = Field(description="s-<n>, unique within the parent run")
    launch_id: str
    command: SteerCommand
    status: Literal["queued"] = "queued"


class WorkstreamMessageRequest(BaseModel):
    model_config = {"extra": "forbid"}

    message: str = Field(min_length=1, max_length=20_000)


class WorkstreamMessageAck(BaseModel):
    launch_id: str
    message_id: str = Field(description="m-<n>, unique within the parent run")
    status: Literal["queued"] = "queued"


class TerminateAck(BaseModel):
    launch_id: str
    state: WorkstreamState


# Inputs of the parent's Steer/Message/Terminate updates (the launch takes a LaunchRequest).


class SteerWorkstream(BaseModel):
    """Input of update ``SteerWorkstream``."""

    model_config = {"extra": "forbid"}

    launch_id: str = Field(min_length=1, max_length=200)
    steer: SteerRequest


class MessageWorkstream(BaseModel):
    """Input of update ``MessageWorkstream``."""

    model_config = {"extra": "forbid"}

    launch_id: str = Field(min_length=1, max_length=200)
    message: WorkstreamMessageRequest


class TerminateWorkstream(BaseModel):
    """Input of update ``TerminateWorkstream``."""

    model_config = {"extra": "forbid"}

    launch_id: str = Field(min_length=1, max_length=200)


# -- parent ↔ child ------------------------------------------------------------


class SteerDirective(BaseModel):
    """A steer as the child receives it (signal ``Steer``)."""

    steer_id: str
    command: SteerCommand
    text: str | None = None
    origin: Literal["user", "deadline", "agent", "budget"] = Field(
        "user",
        description="who sent it; ``budget``: the parent's budget holds or releases the "
        "child (docs/graphs/budgets.md), a hold a user's resume does not lift",
    )


class ChildMessage(BaseModel):
    """A follow-up message for an interactive child (signal ``Message``)."""

    message_id: str
    text: str


class ChildStop(BaseModel):
    """Ask the child to end gracefully after its current step (signal ``Stop``)."""

    reason: Literal["timeout", "terminate", "parent_finished", "parent_canceled"]


class Progress(BaseModel):
    """What the child is doing (signal ``WorkstreamProgress`` to the parent)."""

    launch_id: str
    phase: WorkstreamPhase
    tool: str | None = None
    iteration: int = 0
    message: str | None = Field(None, description="the model's latest message (trimmed)")
    usage: BudgetUsage | None = Field(
        None, description="the child's spend so far (cumulative); counts against the parent"
    )


class WorkstreamCarry(BaseModel):
    """State an interactive child carries across continue-as-new."""

    conversation: list[dict[str, Any]] = Field(
        default_factory=list, description="recent ChatMessage dumps (bounded)"
    )
    iteration: int = 0
    applied_steers: list[str] = Field(default_factory=list, description="bounded, newest last")
    instructions: list[str] = Field(default_factory=list, description="standing steers")
    paused: bool = False
    budget_held: bool = Field(False, description="held by the parent's budget")
    pending_messages: list[ChildMessage] = Field(default_factory=list)
    pending_steers: list[SteerDirective] = Field(default_factory=list)
    last_answer: str | None = None
    generation: int = 0
    usage: BudgetUsage | None = Field(None, description="spend of earlier generations")


class WorkstreamInput(BaseModel):
    """Input of the ``Workstream`` child workflow."""

    launch: LaunchRequest
    launch_id: str
    parent_workflow_id: str
    stream_id: str = Field(description="the parent's message stream")
    tenant_id: str
    user_id: str | None = None
    graph_name: str
    carry: WorkstreamCarry | None = None
    continue_as_new_after: int = Field(
        200, ge=1, description="iterations (LLM turns + tool calls) before continue-as-new"
    )
    replay: CallReplay | None = Field(
        None,
        description="the parent fork's recorded tools/LLM: the child replays them too",
        exclude_if=lambda value: value is None,
    )


class WorkstreamOutcome(BaseModel):
    """The child's result (and the parent's record of how it ended)."""

    launch_id: str
    state: WorkstreamState
    summary: str | None = Field(None, description="the final (or partial) answer, trimmed")
    output: Any = None
    error: str | None = None
    usage: BudgetUsage | None = Field(None, description="what the child spent")
    iterations: int = 0
    artifacts: list[str] = Field(default_factory=list, description="child artifact names")


class ChildState(BaseModel):
    """The child's own view (query ``state``)."""

    launch_id: str
    phase: WorkstreamPhase
    tool: str | None = None
    iteration: int
    paused: bool
    instructions: list[str]
    applied_steers: list[str]
    last_answer: str | None
    generation: int
    waiting_for_message: bool
    budget_held: bool = Field(False, description="held by the parent's budget")


class WorkstreamInfo(BaseModel):
    """One workstream as the parent reports it (query ``workstreams``, REST)."""

    launch_id: str
    workstream_id: str
    child_workflow_id: str
    task: str
    label: str | None = None
    interactive: bool
    state: WorkstreamState
    phase: WorkstreamPhase
    tool: str | None = None
    iteration: int = 0
    latest_message: str | None = None
    started_at: str
    deadline_seconds: int
    elapsed_seconds: float
    deadline_used_pct: float
    summary: str | None = None
    error: str | None = None
    artifacts: list[str] = Field(default_factory=list, description="merged artifact names")
    usage: BudgetUsage | None = Field(None, description="the child's spend as last reported")


class CarriedWorkstream(BaseModel):
    """One workstream as a parent generation hands it to the next (continue-as-new).

    A running child goes on in its own workflow; the next generation re-attaches
    by its workflow id and learns its end from its ``WorkstreamEnded`` signal.
    """

    launch_id: str
    request: LaunchRequest
    child_id: str
    started_at: str = Field(description="ISO time of the launch; the deadline counts from it")
    state: WorkstreamState
    phase: WorkstreamPhase
    tool: str | None = None
    iteration: int = 0
    latest_message: str | None = None
    deadline_steps_done: int = Field(0, description="deadline-timeline steps already taken")
    deadline_seconds: int | None = Field(
        None, description="its deadline, extensions included (None: the request's)"
    )
    reported: WorkstreamOutcome | None = Field(
        None, description="the child's WorkstreamEnded outcome, when it came before the handover"
    )
    ended_at: str | None = None
    outcome: WorkstreamOutcome | None = None
    merged: list[str] = Field(default_factory=list)
    budget_held: bool = Field(False, description="the parent's budget holds it (a steer sent)")
    settled: bool = False
    launched_by: str | None = Field(
        None, description="the agent node whose launch_workstream call launched it"
    )
    wait: bool = Field(True, description="its launching agent waits for it after answering")
    heard: bool = Field(False, description="its end report was given to its launching agent")
    end_seq: int = Field(0, description="the order in which children ended (1 = first)")


class WaitWorkstreams(BaseModel):
    """Arguments of the ``wait_workstreams`` tool."""

    model_config = {"extra": "forbid"}

    launch_ids: list[str] | None = Field(
        None,
        max_length=100,
        description="the workstreams to wait for (default: every non-interactive one the "
        "calling agent launched)",
    )
    timeout_seconds: int | None = Field(
        None,
        ge=1,
        le=WAIT_MAX_SECONDS,
        description="stop waiting after this long (default: until they end)",
    )


class WorkstreamsWaited(BaseModel):
    """The result of the ``wait_workstreams`` tool."""

    reports: list[str] = Field(
        default_factory=list, description="the ended ones' reports, in the order they ended"
    )
    ended: list[str] = Field(default_factory=list, description="their launch ids")
    running: list[str] = Field(
        default_factory=list, description="the ones still running when the timeout came"
    )
    timed_out: bool = False


class WorkstreamList(BaseModel):
    workstreams: list[WorkstreamInfo] = Field(default_factory=list)


def child_workflow_id(parent_workflow_id: str, launch_id: str) -> str:
    return f"{parent_workflow_id}.{launch_id}"


def merged_artifact_name(launch_id: str, child_name: str) -> str | None:
    """Where a child artifact lands in the parent (None: not merged).

    ``out/x`` and ``files/x`` of the child become ``files/<launch_id>/x``.
    """
    for prefix in ("out/", "files/"):
        if child_name.startswith(prefix) and len(child_name) > len(prefix):
            return f"files/{launch_id}/{child_name[len(prefix) :]}"
    return None
