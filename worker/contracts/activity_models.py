"""Typed models in and out of every activity.

The workflow decides what runs; activities do all I/O (posting messages to the
bus, archiving to MongoDB, calling LLMs and tools). One node execution is one
activity (``execute_node``), except ``agent`` nodes (one activity per LLM turn and
one per tool call) and ``prompt`` nodes (one to ask, one to accept the answer).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from spindle.shared.contracts.budgets import BudgetState, TurnUsage
from spindle.shared.contracts.envelope import StateUpdate
from spindle.shared.contracts.forks import CallReplay
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.contracts.runs import NodeReport, PendingInput, RunStatus, UserInput
from spindle.shared.graphs.node_params import InlineNode
from spindle.worker.contracts.envelope import InboundEnvelope


class RunRef(BaseModel):
    """Who is running: identifies the run, its stream and its tenant."""

    workflow_id: str
    run_id: str
    stream_id: str
    workstream_id: str = "main"
    tenant_id: str = "default"
    graph_name: str
    user_id: str | None = Field(
        None, description="the user who started the run (its owner); None: a scheduled run"
    )
    replay: CallReplay | None = Field(
        None,
        description="a fork's replay modes: its tool calls and LLM turns may answer from "
        "the source run's records (docs/replay-and-compare.md#recorded-replay)",
        # None for every other run: their activity inputs stay as they were.
        exclude_if=lambda value: value is None,
    )


class NodeExecution(BaseModel):
    """Input of ``execute_node`` (and the node part of other activities)."""

    run: RunRef
    node: NodeSpec
    visit: int = 1
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="the run state the node reads: _previous, meta, context and the keys "
        "its inputs/templates/expressions name (spindle.shared.graphs.state_reads)",
    )
    started_at: str = Field(description="ISO 8601 workflow time the node started")
    inputs: list[InboundEnvelope] = Field(
        default_factory=list,
        description="the envelopes that arrived on the edges into the node, payloads by "
        "state key (docs/graphs/envelopes.md)",
        # None arrived (a run recorded before envelopes flowed): the payload stays as it was.
        exclude_if=lambda value: not value,
    )


class NodeOutcome(BaseModel):
    """What a node produced: output, chosen ports, metadata, its writes to shared
    state and context, and its report."""

    output: Any = None
    ports: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)
    report: NodeReport
    state: StateUpdate | None = Field(
        None, description="writes to shared state", exclude_if=lambda value: value is None
    )
    context: StateUpdate | None = Field(
        None, description="writes to the run's context", exclude_if=lambda value: value is None
    )


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """One LLM chat message (OpenAI-compatible roles)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class LlmTurnInput(BaseModel):
    """One LLM turn. With ``conversation`` set, ``messages`` holds only the messages
    from position ``stored`` on; the activity stores them and loads the earlier
    ones (``spindle.shared.store.conversations``), so history per turn is constant."""

    execution: NodeExecution
    turn: int
    messages: list[ChatMessage]
    conversation: str | None = Field(
        None, description="the loop's id in the conversation store; None: messages are all"
    )
    stored: int = Field(0, ge=0, description="messages before these, in the conversation store")
    memory_key: str | None = Field(
        None,
        description="the agent's memory in the run (``<node>``, or ``<node>.<visit>`` per "
        "visit): the conversation is its memory log under the context policy "
        "(spindle.shared.store.agent_memory); None: the per-loop store as before",
    )
    thread: str | None = Field(
        None,
        description="the run's conversation id: the memory is the thread's, shared by its runs",
    )


class LlmTurnResult(BaseModel):
    message: ChatMessage
    final: bool
    report: NodeReport | None = Field(
        None, description="set on the final turn: the agent node's report (archived)"
    )
    usage: TurnUsage | None = Field(
        None, description="tokens and cost of this turn (budgets); None: not reported"
    )


class ToolCallInput(BaseModel):
    execution: NodeExecution
    turn: int
    call: ToolCall
    batch_index: int = Field(1, description="1-based position of this call in its turn's batch")
    batch_size: int = Field(1, description="tool calls the model asked for in the same turn")


class ToolCallResult(BaseModel):
    call_id: str
    name: str
    content: str = Field(description="JSON text of the tool's result or error")
    ok: bool = True


class InputRequest(BaseModel):
    execution: NodeExecution
    pending: PendingInput
    owner: str | None = Field(None, description="the run's user: answers unassigned prompts")


class InputAcceptance(BaseModel):
    execution: NodeExecution
    pending: PendingInput
    answer: dict[str, Any]
    user_input: UserInput
    answered_at: str | None = Field(None, description="when the run took the answer (ISO)")


class InputExpiry(BaseModel):
    """A prompt nobody answered in time: what the ``expire_input`` activity records."""

    execution: NodeExecution
    pending: PendingInput


class RunFinish(BaseModel):
    """Input of ``finish_run``: how the run ended, and which of its records to close.

    The two flags let a run that asked no one and tracks no task skip a MongoDB
    round trip each; a run recorded before they existed closes and looks up both.
    """

    run: RunRef
    status: RunStatus
    output: Any = None
    error: str | None = None
    prompts_asked: bool = Field(
        True, description="the run may have opened prompts (any generation): close them"
    )
    tracks_tasks: bool = Field(
        True, description="the run is a task run (``tasks.execute``): end its tasks"
    )
    budget: BudgetState | None = Field(
        None, description="the run's budget as it ended (kept on its document and webhook)"
    )
    generations: int | None = Field(
        None, description="runs of its continue-as-new chain (kept on its document)"
    )
    node_counts: dict[str, int] | None = Field(
        None, description="node executions by status over the whole run (kept on its document)"
    )
    decided: list[NodeReport] = Field(
        default_factory=list,
        description="reports no activity archived (skipped, reused, workstream nodes)",
    )


class Empty(BaseModel):
    """For activities with nothing to return."""


class RunNotice(BaseModel):
    """Input of ``post_message``: a message the workflow itself has to say (e.g. a
    WARNING when a loop bound is reached). Its activity id makes the post idempotent."""

    run: RunRef
    type: int = Field(description="spindle.shared.contracts.messages.AgentMessageType value")
    text: str
    details: dict[str, Any] | None = None


class WorkstreamFinish(BaseModel):
    """Input of ``finish_workstream``: how a child workstream ended.

    ``run`` is the child's ref (its own workflow id, the parent's stream, its
    ``workstream_id``). A non-empty ``answer`` is stored as ``out/result.md``.
    """

    run: RunRef
    state: str = Field(description="spindle.shared.contracts.workstreams.WorkstreamState value")
    answer: str | None = None
    error: str | None = None
    iterations: int = 0
    user_id: str | None = None


class WorkstreamFinished(BaseModel):
    """What ``finish_workstream`` stored: the child's artifact names."""

    artifacts: list[str] = Field(default_factory=list)


class ArtifactMerge(BaseModel):
    """Input of ``merge_child_artifacts``: copy a workstream's artifacts to its parent."""

    tenant_id: str
    parent_workflow_id: str
    child_workflow_id: str
    launch_id: str


class MergedArtifacts(BaseModel):
    """What ``merge_child_artifacts`` copied: the parent's new artifact names."""

    names: list[str] = Field(default_factory=list)


class ItemPlan(BaseModel):
    """What ``plan_items`` stored: how many items, in how many pages (batches)."""

    total: int
    pages: int
    batch_size: int
    expression_steps: int | None = Field(
        None,
        description="the map's expression budget left after its plan, shared by its items "
        "(each batch takes its items' share); None: the worker's expression_node_steps",
    )


class ItemBatch(BaseModel):
    """Input of ``run_item_batch``: one page of a map's items, run through its node.

    ``execution`` carries no state: the batch reads the state ``plan_items``
    stored, so history holds no item and no copy of the state per batch.
    """

    execution: NodeExecution
    node: InlineNode
    page: int
    plan: ItemPlan
    concurrency: int = Field(ge=1, description="items of this batch in flight at once")
    first: int = Field(
        0, ge=0, description="the page's first item to run (a page split at a budget cap)"
    )
    count: int | None = Field(
        None, ge=1, description="items to run from ``first``; None: the rest of the page"
    )


class ItemBatchDone(BaseModel):
    """What one batch did: its items' counts (the items themselves are stored)."""

    succeeded: int
    failed: int
    llm: TurnUsage | None = Field(
        None, description="an agent per item: the batch's LLM tokens and cost, all items"
    )
    tool_calls: int = Field(
        0, description="an agent per item: the tool calls its items' agents made, all items"
    )


class ItemCollection(BaseModel):
    """Input of ``collect_items``: assemble a map's output from its result pages.

    ``execution`` carries only the run's ``meta`` of the state (a task run's ids).
    """

    execution: NodeExecution
    plan: ItemPlan
    max_failed_ratio: float = 1.0


class RunStart(BaseModel):
    """Input of ``record_run_start``: what a scheduled run's document starts with."""

    run: RunRef
    user_id: str | None = None
    input: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    scheduled_by: str | None = Field(
        None,
        description="the schedule that started the run: its run-start permit is taken "
        "(or its prepaid one used); None in histories recorded before permits",
    )


class RunStartAdmission(BaseModel):
    """Output of ``record_run_start``: whether the run may run its graph.

    Histories recorded before run-start permits hold an empty result: admitted.
    """

    admitted: bool = True
    error: str | None = Field(
        None, description="why not: the limit and its setting (docs/schedules.md)"
    )
