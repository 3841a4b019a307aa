"""The agent loop: an LLM conversation driven by the workflow.

One ``llm_turn`` activity per turn and one ``tool_call`` activity per tool call the
model asked for (the calls of one turn run in parallel), until the model answers
without tool calls or ``max_turns`` is reached. The conversation lives in the
workflow: only the turns' own messages (assistant replies and tool results); the
``llm_turn`` activity prepends the system/user opening it derives from the node's
params and the state (``spindle.worker.llm.prompting.with_opening``), so the history stays
small and both sides build the same opening. Since ``MEMORY_PATCH`` each turn also
names the agent's memory (``LlmTurnInput.memory_key``/``thread``): the activity keeps
the whole conversation there, across visits and runs, and gives the model what the
node's context policy keeps of it (docs/conversations.md, Memory).

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
import json
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
# Turns name the agent's memory (LlmTurnInput.memory_key/thread); histories from before
# replay without it (docs/conversations.md, Memory).
MEMORY_PATCH = "agent-memory"
# Since this patch an agent node's metadata names it and its tenant (seed 004):
# ``meta.agentId`` / ``meta.tenantId`` for the nodes after it (docs/graphs/index.md).
AGENT_META_PATCH = "agent-meta-ids"


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
    """Counts the loop's spend; ``gate`` runs before each LLM turn and each
    workflow-answered tool call (after the hooks' ``before_*``) and may wait there
    or raise. A turn's ``tool_call`` activities are checked once as a batch
    (``check_batch``, before any starts) and each is admitted and counted before
    it starts (``take_tools``): at most the allowance runs, the others wait at
    the cap (docs/graphs/budgets.md)."""

    async def gate(self, step: Literal["llm", "tool"]) -> None: ...

    def llm_used(self, usage: TurnUsage | None) -> None: ...

    def check_batch(self, count: int) -> None: ...

    async def take_tools(self, wanted: int = 1) -> int: ...


class AgentHooks(Protocol):
    """Callbacks of the loop, all in workflow code (deterministic).

    Order per turn: ``should_stop`` → ``before_llm`` → ``extra_messages`` (the turn
    boundary) → ``llm_turn`` activity → ``after_llm`` → for each tool call (in
    parallel): ``before_tool`` → tool → then the next turn. After a final answer,
    ``after_answer`` may continue the conversation. Once ``should_stop`` holds, no
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

    async def after_answer(self, reply: AgentReply) -> list[ChatMessage] | None:
        """After a final answer: None ends the loop with it; messages (a user's next
        message, a child's result) continue the same conversation with them. May
        wait (IDLE) first. ``max_turns`` counts again from the next turn."""
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
        base: messages stored before ``conversation`` (a resumed loop holds only
            those after them).
        stored: messages stored so far, counted from the loop's start; those of
            ``conversation`` from ``stored - base`` on are not stored yet.
        last_turn: the number of the loop's latest LLM turn (all exchanges).
    """

    conversation: list[ChatMessage] = Field(default_factory=list)
    answer: str = ""
    final: bool = False
    stopped: bool = False
    exhausted: bool = False
    turns: int = 0
    report: NodeReport | None = None
    base: int = 0
    stored: int = 0
    last_turn: int = 0


class LoopResume(BaseModel):
    """Where a loop carried across continue-as-new stands (its conversation is stored
    by reference): it waits in ``after_answer`` before any turn.

    Attributes:
        stored: messages in the conversation store.
        turn: LLM turns run so far (the next turn's number follows it).
        unsent: messages after the stored ones (the last answer).
        answer: the last answer.
    """

    stored: int = 0
    turn: int = 0
    unsent: list[ChatMessage] = Field(default_factory=list)
    answer: str = ""


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
    id_prefix: str | None = None,
    resume: LoopResume | None = None,
) -> NodeOutcome:
    """Run an agent node to its final answer.

    Args:
        execution: the node (``type: agent``) and the run state.
        toolbox: tools answered in the workflow (e.g. ``launch_workstream``).
        hooks: loop callbacks; a stop returns the best answer so far.
        meter: counts spend; may hold or refuse the next step at a budget cap.
        id_prefix: as ``converse``'s.
        resume: a loop carried across continue-as-new (``converse``).

    Returns:
        The outcome whose output is the final assistant content.

    Raises:
        ApplicationError: ``AgentMaxTurns`` (non-retryable) when the model still
            asks for tools after ``max_turns`` turns.
        temporalio.exceptions.ActivityError: a turn or tool call failed for good.
    """
    node = execution.node
    started = workflow.now()
    reply = await converse(
        execution, toolbox=toolbox, hooks=hooks, meter=meter, id_prefix=id_prefix, resume=resume
    )
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
    meta: dict[str, object] = {}
    if workflow.patched(AGENT_META_PATCH):
        meta = {"agentId": node.id, "tenantId": execution.run.tenant_id}
    return NodeOutcome(output=structured_answer(execution, reply.answer), report=report, meta=meta)


def structured_answer(execution: NodeExecution, answer: str) -> object:
    """The node's output: the answer, or with ``params.output_schema`` its JSON, which the
    ``llm_turn`` activity checked and made canonical (docs/graphs/node-types.md). An answer
    the activity did not check (a stopped loop's best so far) stays text."""
    node = execution.node
    if node.params.get("output_schema") is None and "output_schema" not in node.inputs:
        return answer
    try:
        return json.loads(answer)
    except ValueError:
        return answer


async def converse(
    execution: NodeExecution,
    *,
    opening: Sequence[ChatMessage] | None = None,
    toolbox: WorkflowToolbox | None = None,
    hooks: AgentHooks | None = None,
    id_prefix: str | None = None,
    meter: StepMeter | None = None,
    resume: LoopResume | None = None,
) -> AgentReply:
    """Run the loop until a final answer, a stop, or ``max_turns``; never raises
    for the turn limit (see ``AgentReply.exhausted``).

    Args:
        execution: the agent (node params: instructions, tools, max_turns, model)
            and the state the ``llm_turn`` activity derives the opening from.
        opening: the conversation so far; sent before this run's messages. When
            it holds a system and a user message, the activity adds nothing.
        toolbox: tools answered in the workflow.
        hooks: loop callbacks; after a final answer ``after_answer`` may continue
            the same conversation (turn numbers go on; ``max_turns`` counts anew).
        id_prefix: activity ids are ``<id_prefix>.t<turn>`` and
            ``<id_prefix>.t<turn>.<call id>``; default ``<node id>.<visit>``.
            Must make them unique within the workflow run.
        meter: counts each turn's usage and each tool call; its ``gate`` runs
            before each step and may wait (a budget's pause) or raise.
        resume: a loop carried across continue-as-new: its stored conversation is
            continued (by reference) after ``hooks.after_answer`` gives messages.

    Raises:
        temporalio.exceptions.ActivityError: a turn or tool call failed for good.
        ApplicationError: ``BudgetExhausted`` from the meter's gate.
    """
    node = execution.node
    prefix = id_prefix if id_prefix is not None else f"{node.id}.{execution.visit}"
    limit = max_turns(execution)
    base = resume.stored if resume is not None else 0
    before = [*(resume.unsent if resume is not None else []), *(opening or [])]
    messages: list[ChatMessage] = []
    # Each turn sends only the messages new since the last one; the activity keeps the
    # rest (docs/graphs/index.md, long runs), so history does not grow with turns squared.
    sent, turn = base, (resume.turn if resume is not None else 0)
    if resume is not None:
        waited = await _resumed(hooks, resume, before)
        if waited is None:
            return AgentReply(
                conversation=before, answer=resume.answer, final=True, base=base, stored=sent
            )
        messages.extend(waited)
    best, used = "", 0  # turns of this exchange
    while used < limit:
        turn, used = turn + 1, used + 1
        if hooks is not None and await _stops_before_turn(hooks, turn, messages):
            return AgentReply(
                conversation=before + messages, answer=best, stopped=True, turns=used - 1
            )
        if meter is not None:
            await meter.gate("llm")
        conversation = before + messages
        result = await _llm_turn(execution, prefix, turn, conversation, sent, base=base)
        sent = base + len(conversation)
        if meter is not None:
            meter.llm_used(result.usage)
        messages.append(result.message)
        best = result.message.content or best
        if hooks is not None:
            hooks.after_llm(turn, result.message)
        if result.final or not result.message.tool_calls:
            reply = _answered(result, before + messages, used, turn, (base, sent))
            more = await hooks.after_answer(reply) if hooks is not None else None
            if more is None:
                return reply
            messages.extend(more)  # the same conversation goes on: a new exchange
            used = 0
            continue
        calls = result.message.tool_calls
        messages += await _call_tools(
            execution, prefix, turn, calls, toolbox=toolbox, hooks=hooks, meter=meter
        )
    return AgentReply(conversation=before + messages, answer=best, exhausted=True, turns=limit)


def _answered(
    result: LlmTurnResult,
    conversation: list[ChatMessage],
    turns: int,
    last_turn: int,
    stored: tuple[int, int],
) -> AgentReply:
    """The reply of a turn that gave a final answer: ``turns`` of this exchange, the
    loop's ``last_turn``, and the (base, stored) counts of the stored conversation."""
    return AgentReply(
        conversation=conversation,
        answer=result.message.content or "",
        final=True,
        turns=turns,
        report=result.report,
        base=stored[0],
        stored=stored[1],
        last_turn=last_turn,
    )


async def _resumed(
    hooks: AgentHooks | None, resume: LoopResume, before: list[ChatMessage]
) -> list[ChatMessage] | None:
    """A carried loop waits as after its last answer; the messages that wake it, or None."""
    if hooks is None:
        return None
    waiting = AgentReply(
        conversation=before,
        answer=resume.answer,
        final=True,
        base=resume.stored,
        stored=resume.stored,
        last_turn=resume.turn,
    )
    return await hooks.after_answer(waiting)


async def _stops_before_turn(hooks: AgentHooks, turn: int, messages: list[ChatMessage]) -> bool:
    """The hooks before a turn (``messages`` gets their extra messages); True to stop."""
    if hooks.should_stop():
        return True
    await hooks.before_llm(turn)
    messages.extend(hooks.extra_messages())
    return hooks.should_stop()


def _memory(execution: NodeExecution, prefix: str) -> tuple[str, str | None]:
    """The agent's memory key and thread (docs/conversations.md, Memory): ``params.memory``
    ``thread`` (default) and ``run`` continue the node's own conversation across loop
    visits (key ``<node>``); ``thread`` shares it with the runs of the run's conversation
    (the ``conversation`` memo its ``Conversation`` workflow sets); ``per_visit`` and
    ``none`` start each visit empty (key ``<id prefix>``)."""
    mode = execution.node.params.get("memory", "thread")
    if mode in ("per_visit", "none"):
        return prefix, None
    thread = workflow.memo_value("conversation", None) if mode == "thread" else None
    return execution.node.id, thread if isinstance(thread, str) and thread else None


async def _llm_turn(
    execution: NodeExecution,
    prefix: str,
    turn: int,
    conversation: list[ChatMessage],
    sent: int,
    *,
    base: int = 0,
) -> LlmTurnResult:
    """One ``llm_turn`` activity: the messages after the ``sent`` already stored.

    Since ``MEMORY_PATCH`` it names the agent's memory (``memory_key``, ``thread``):
    the activity gives the model that memory under the node's context policy.
    """
    node = execution.node
    memory_key, thread = (
        _memory(execution, prefix) if workflow.patched(MEMORY_PATCH) else (None, None)
    )
    result: LlmTurnResult = await workflow.execute_activity(
        LLM_TURN,
        LlmTurnInput(
            execution=execution,
            turn=turn,
            messages=conversation[sent - base :],
            conversation=prefix,
            stored=sent,
            memory_key=memory_key,
            thread=thread,
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
    if meter is not None:
        # One check for the whole batch before any call starts: with on_exhausted
        # fail, a batch over what is left fails here and none of it runs.
        counted = sum(1 for c in calls if toolbox is None or c.name not in toolbox.names)
        meter.check_batch(counted)
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
    if toolbox is not None and call.name in toolbox.names:
        if meter is not None:
            await meter.gate("tool")
        return await toolbox.call(call)
    if meter is not None:
        # Admitted and counted before it starts, with no await between: the calls of a
        # batch started in order take what is left; the others wait at the cap.
        await meter.take_tools(1)
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
    return result
