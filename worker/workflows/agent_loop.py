"""The ``agent`` node: an LLM loop driven by the workflow.

One ``llm_turn`` activity per turn and one ``tool_call`` activity per tool call the
model asked for (the calls of one turn run in parallel), until the model answers
without tool calls or ``max_turns`` is reached. The conversation lives in the
workflow: only the turns' own messages (assistant replies and tool results); the
``llm_turn`` activity prepends the system/user opening it derives from the node's
params and the state (``worker.llm.prompting.with_opening``), so the history stays
small and both sides build the same opening.

Runs inside the workflow sandbox: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from shared.node_params import AgentParams
    from shared.run_models import NodeReport, NodeStatus
    from worker import policies
    from worker.activities.models import (
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
    )

MAX_TURNS_ERROR = "AgentMaxTurns"


def max_turns(execution: NodeExecution) -> int:
    """The node's ``max_turns`` (literal params; the default of ``AgentParams``)."""
    value = execution.node.params.get("max_turns")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    default = AgentParams.model_fields["max_turns"].default
    return int(default)


async def run_agent(execution: NodeExecution) -> NodeOutcome:
    """Run an agent node to its final answer.

    Returns:
        The outcome whose output is the final assistant content.

    Raises:
        ApplicationError: ``AgentMaxTurns`` (non-retryable) when the model still
            asks for tools after ``max_turns`` turns.
        temporalio.exceptions.ActivityError: a turn or tool call failed for good.
    """
    node = execution.node
    started = workflow.now()
    limit = max_turns(execution)
    messages: list[ChatMessage] = []
    for turn in range(1, limit + 1):
        result = await workflow.execute_activity(
            LLM_TURN,
            LlmTurnInput(execution=execution, turn=turn, messages=list(messages)),
            result_type=LlmTurnResult,
            activity_id=f"{node.id}.{execution.visit}.t{turn}",
            start_to_close_timeout=policies.node_timeout(node),
            retry_policy=policies.node_retry(node, policies.LLM_RETRY),
            task_queue=node.task_queue,
        )
        messages.append(result.message)
        if result.final or not result.message.tool_calls:
            report = result.report or NodeReport(
                node_id=node.id,
                node_type=node.type,
                status=NodeStatus.SUCCESS,
                visit=execution.visit,
                started_at=execution.started_at,
                duration_ms=(workflow.now() - started).total_seconds() * 1000,
                output_summary=(result.message.content or "")[:200],
            )
            return NodeOutcome(output=result.message.content or "", report=report)
        results = await asyncio.gather(
            *(_call_tool(execution, turn, call) for call in result.message.tool_calls)
        )
        messages.extend(
            ChatMessage(role="tool", content=r.content, tool_call_id=r.call_id, name=r.name)
            for r in results
        )
    raise ApplicationError(
        f"agent '{node.id}' gave no final answer within max_turns ({limit})",
        {"node": node.id, "max_turns": limit},
        type=MAX_TURNS_ERROR,
        non_retryable=True,
    )


async def _call_tool(execution: NodeExecution, turn: int, call: ToolCall) -> ToolCallResult:
    node = execution.node
    result: ToolCallResult = await workflow.execute_activity(
        TOOL_CALL,
        ToolCallInput(execution=execution, turn=turn, call=call),
        result_type=ToolCallResult,
        activity_id=f"{node.id}.{execution.visit}.t{turn}.{call.id}",
        start_to_close_timeout=policies.TOOL_CALL_START_TO_CLOSE,
        retry_policy=policies.TOOL_RETRY,
        task_queue=node.task_queue,
    )
    return result
