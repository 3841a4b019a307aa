"""The agent loop: an LLM conversation driven by the workflow.

One ``llm_turn`` activity per turn and one ``tool_call`` activity per tool call the
model asked for (the calls of one turn run in parallel), until the model answers
without tool calls or ``max_turns`` is reached. The conversation lives in the
workflow: only the turns' own messages (assistant replies and tool results); the
``llm_turn`` activity prepends the system/user opening it derives from the node's
params and the state (``spindle.worker.llm.prompting.with_opening``), so the history stays
small and both sides build the same opening.

The same loop serves ``agent`` nodes (``run_agent``) and workstreams
(``converse``), which add optional hooks:

- a ``WorkflowToolbox`` answers some tool calls inside the workflow (no activity),
  e.g. ``launch_workstream``;
- ``AgentHooks`` let the caller pause before a step, inject steering messages,
  watch each model message and ask for a graceful stop;
- ``opening`` continues an earlier conversation (interactive follow-ups);
- a ``StepMeter`` counts each turn's tokens and each tool call, and may hold
  or refuse the next step at a budget cap (docs/graphs/budgets.md).

Without hooks, toolbox, opening and a meter at a cap the loop schedules exactly the activities it
always did (ids and inputs), so recorded histories replay.

Runs inside the workflow sandbox: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, Field
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.budgets import TurnUsage
    from spindle.shared.contracts.errors import AgentMaxTurns, to_application_error
    from spindle.shared.contracts.runs import NodeReport, NodeStatus
    from spindle.shared.graphs.node_params import AgentParams
    from spindle.worker.contracts import (
        LLM_TURN,
        TOOL_CALL,
        ChatMessage,
        LlmTurnInput,
        LlmTurnResult,
        NodeExecution,
        NodeOutcome,
        ToolCall,
        ToolCallInput,
        ToolCallResult,
        policies,
    )

MAX_TURNS_ERROR = AgentMaxTurns.application_type
_STOPPED = '{"error": "stopped before this tool ran"}'


class WorkflowToolbox(Protocol):
    """Tools answered inside the workflow instead of by a ``tool_call`` activity.

    Attributes:
        names: the tool names this toolbox handles; calls of other tools go to
            the ``tool_call`` activity as usual.
    """

    @property
    def names(self) -> frozenset[str]: ...

    async def call(self, call: ToolCall) -> ToolCallResult:
        """Handle one call (deterministically: workflow code). Errors should come
        back as a result with ``ok=False`` so the model can read them."""
        ...


class StepMeter(Protocol):
    """Counts the loop's spend; ``gate`` runs before each LLM turn and tool call
    (after the hooks' ``before_*``) and may wait there or raise."""

    async def gate(self, step: Literal["llm", "tool"]) -> None: ...

    def llm_used(self, usage: TurnUsage | None) -> None: ...

    def tools_used(self, count: int = 1) -> None: ...


class AgentHooks(Protocol):
    """Callbacks of the loop, all in workflow code (deterministic).

    Order per turn: ``should_stop`` → ``before_llm`` → ``extra_messages`` →
    ``llm_turn`` activity → ``after_llm`` → for each tool call (in parallel):
    ``before_tool`` → tool → then the next turn. Once ``should_stop`` holds, no
    further LLM turn or tool call runs (checked after each ``before_*`` too).
    """

    async def before_llm(self, turn: int) -> None:
        """Before turn ``turn`` (1-based) asks the model; may wait (pause)."""
        ...

    async def before_tool(self, turn: int, call: ToolCall) -> None:
        """Before one tool call of turn ``turn`` runs; may wait (pause)."""
        ...

    def after_llm(self, turn: int, message: ChatMessage) -> None:
        """The model's message of turn ``turn`` (tool calls or the final answer)."""
        ...

    def extra_messages(self) -> list[ChatMessage]:
        """Messages (steering) to add before the next LLM turn; each is returned
        once. Called after ``before_llm``."""
        ...

    def should_stop(self) -> bool:
        """True to end now with the best answer so far instead of another turn."""
        ...


class AgentReply(BaseModel):
    """How one run of the loop ended.

    Attributes:
        conversation: ``opening`` plus every message of this run (assistant
            replies, tool results, injected messages), to continue from.
        answer: the final answer; when ``stopped`` or ``exhausted``, the latest
            non-empty assistant content (best answer so far), else "".
        final: the model gave a final answer (no tool calls).
        stopped: ``hooks.should_stop()`` ended the loop before a final answer.
        exhausted: ``max_turns`` turns ran and the model still asked for tools.
        turns: LLM turns run.
        report: the final turn's report (set by the ``llm_turn`` activity).
    """

    conversation: list[ChatMessage] = Field(default_factory=list)
    answer: str = ""
    final: bool = False
    stopped: bool = False
    exhausted: bool = False
    turns: int = 0
    report: NodeReport | None = None


def max_turns(execution: NodeExecution) -> int:
    """The node's ``max_turns`` (literal params; the default of ``AgentParams``)."""
    value = execution.node.params.get("max_turns")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    default = AgentParams.model_fields["max_turns"].default
    return int(default)


async def run_agent(
    execution: NodeExecution,
    *,
    toolbox: WorkflowToolbox | None = None,
    hooks: AgentHooks | None = None,
    meter: StepMeter | None = None,
) -> NodeOutcome:
    """Run an agent node to its final answer.

    Args:
        execution: the node (``type: agent``) and the run state.
        toolbox: tools answered in the workflow (e.g. ``launch_workstream``).
        hooks: loop callbacks; a stop returns the best answer so far.
        meter: counts spend; may hold or refuse the next step at a budget cap.

    Returns:
        The outcome whose output is the final assistant content.

    Raises:
        ApplicationError: ``AgentMaxTurns`` (non-retryable) when the model still
            asks for tools after ``max_turns`` turns.
        temporalio.exceptions.ActivityError: a turn or tool call failed for good.
    """
    node = execution.node
    started = workflow.now()
    reply = await converse(execution, toolbox=toolbox, hooks=hooks, meter=meter)
    if reply.exhausted:
        limit = max_turns(execution)
        raise to_application_error(
            AgentMaxTurns(
                f"agent '{node.id}' gave no final answer within max_turns ({limit})",
                context={"node": node.id, "max_turns": limit},
            )
        )
    report = reply.report or NodeReport(
        node_id=node.id,
        node_type=node.type,
        status=NodeStatus.SUCCESS,
        visit=execution.visit,
        started_at=execution.started_at,
        duration_ms=(workflow.now() - started).total_seconds() * 1000,
        output_summary=reply.answer[:200],
    )
    return NodeOutcome(output=reply.answer, report=report)


async def converse(
    execution: NodeExecution,
    *,
    opening: Sequence[ChatMessage] | None = None,
    toolbox: WorkflowToolbox | None = None,
    hooks: AgentHooks | None = None,
    id_prefix: str | None = None,
    meter: StepMeter | None = None,
) -> AgentReply:
    """Run the loop until a final answer, a stop, or ``max_turns``; never raises
    for the turn limit (see ``AgentReply.exhausted``).

    Args:
        execution: the agent (node params: instructions, tools, max_turns, model)
            and the state the ``llm_turn`` activity derives the opening from.
        opening: the conversation so far; sent before this run's messages. When
            it holds a system and a user message, the activity adds nothing.
            Messages from ``hooks.extra_messages`` need such an opening: without
            a user message in it, the activity would not add the node's prompt.
        toolbox: tools answered in the workflow.
        hooks: loop callbacks.
        id_prefix: activity ids are ``<id_prefix>.t<turn>`` and
            ``<id_prefix>.t<turn>.<call id>``; default ``<node id>.<visit>``.
            Must make them unique within the workflow run.
        meter: counts each turn's usage and each tool call; its ``gate`` runs
            before each step and may wait (a budget's pause) or raise.

    Raises:
        temporalio.exceptions.ActivityError: a turn or tool call failed for good.
        ApplicationError: ``BudgetExhausted`` from the meter's gate.
    """
    node = execution.node
    prefix = id_prefix if id_prefix is not None else f"{node.id}.{execution.visit}"
    limit = max_turns(execution)
    before = list(opening or [])
    messages: list[ChatMessage] = []
    best = ""
    # Each turn sends only the messages new since the last one; the activity keeps the
    # rest (docs/graphs/index.md, long runs), so history does not grow with turns squared.
    sent = 0
    for turn in range(1, limit + 1):
        if hooks is not None and await _stops_before_turn(hooks, turn, messages):
            return AgentReply(
                conversation=before + messages, answer=best, stopped=True, turns=turn - 1
            )
        if meter is not None:
            await meter.gate("llm")
        conversation = before + messages
        result = await _llm_turn(execution, prefix, turn, conversation, sent)
        sent = len(conversation)
        if meter is not None:
            meter.llm_used(result.usage)
        messages.append(result.message)
        if result.message.content:
            best = result.message.content
        if hooks is not None:
            hooks.after_llm(turn, result.message)
        if result.final or not result.message.tool_calls:
            return AgentReply(
                conversation=before + messages,
                answer=result.message.content or "",
                final=True,
                turns=turn,
                report=result.report,
            )
        calls = result.message.tool_calls
        messages += await _call_tools(
            execution, prefix, turn, calls, toolbox=toolbox, hooks=hooks, meter=meter
        )
    return AgentReply(conversation=before + messages, answer=best, exhausted=True, turns=limit)


async def _stops_before_turn(hooks: AgentHooks, turn: int, messages: list[ChatMessage]) -> bool:
    """The hooks before a turn (``messages`` gets their extra messages); True to stop."""
    if hooks.should_stop():
        return True
    await hooks.before_llm(turn)
    messages.extend(hooks.extra_messages())
    return hooks.should_stop()


async def _llm_turn(
    execution: NodeExecution,
    prefix: str,
    turn: int,
    conversation: list[ChatMessage],
    sent: int,
) -> LlmTurnResult:
    """One ``llm_turn`` activity: the messages after the ``sent`` already stored."""
    node = execution.node
    result: LlmTurnResult = await workflow.execute_activity(
        LLM_TURN,
        LlmTurnInput(
            execution=execution,
            turn=turn,
            messages=conversation[sent:],
            conversation=prefix,
            stored=sent,
        ),
        result_type=LlmTurnResult,
        activity_id=f"{prefix}.t{turn}",
        start_to_close_timeout=policies.node_timeout(node),
        heartbeat_timeout=policies.node_heartbeat(node),
        retry_policy=policies.node_retry(node, policies.LLM_RETRY),
        task_queue=node.task_queue,
        priority=policies.node_priority(node),
    )
    return result


async def _call_tools(
    execution: NodeExecution,
    prefix: str,
    turn: int,
    calls: list[ToolCall],
    *,
    toolbox: WorkflowToolbox | None,
    hooks: AgentHooks | None,
    meter: StepMeter | None,
) -> list[ChatMessage]:
    """The tool calls of one turn, in parallel; their results as ``tool`` messages."""
    results = await asyncio.gather(
        *(
            _call_tool(
                execution,
                prefix,
                turn,
                call,
                toolbox=toolbox,
                hooks=hooks,
                meter=meter,
                batch=(index, len(calls)),
            )
            for index, call in enumerate(calls, start=1)
        )
    )
    return [
        ChatMessage(role="tool", content=r.content, tool_call_id=r.call_id, name=r.name)
        for r in results
    ]


async def _call_tool(
    execution: NodeExecution,
    prefix: str,
    turn: int,
    call: ToolCall,
    *,
    toolbox: WorkflowToolbox | None,
    hooks: AgentHooks | None,
    meter: StepMeter | None = None,
    batch: tuple[int, int] = (1, 1),
) -> ToolCallResult:
    node = execution.node
    if hooks is not None:
        await hooks.before_tool(turn, call)
        if hooks.should_stop():
            # A graceful stop runs no further step: the call is answered as skipped.
            return ToolCallResult(call_id=call.id, name=call.name, content=_STOPPED, ok=False)
    if meter is not None:
        await meter.gate("tool")
    if toolbox is not None and call.name in toolbox.names:
        return await toolbox.call(call)
    result: ToolCallResult = await workflow.execute_activity(
        TOOL_CALL,
        ToolCallInput(
            execution=execution, turn=turn, call=call, batch_index=batch[0], batch_size=batch[1]
        ),
        result_type=ToolCallResult,
        activity_id=f"{prefix}.t{turn}.{call.id}",
        start_to_close_timeout=policies.TOOL_CALL_START_TO_CLOSE,
        heartbeat_timeout=policies.node_heartbeat(node),
        retry_policy=policies.TOOL_RETRY,
        task_queue=node.task_queue,
        priority=policies.node_priority(node),
    )
    if meter is not None:
        meter.tools_used()
    return result
