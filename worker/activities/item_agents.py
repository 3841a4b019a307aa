"""A ``map``'s per-item ``agent``: one LLM loop per item, inside its batch (seed 001).

A graph's agent node runs its loop in the workflow, one activity per turn and per
tool call; ten thousand items doing that would put ten thousand loops' events in
one history. An item's agent instead runs its whole loop here, in the batch
activity that runs the item, so history still grows by a constant per batch
(docs/graphs/items.md#an-agent-per-item):

- at most ``concurrency`` items (so LLM loops) run at once, the map's own bound;
- each loop stops at the agent's ``max_turns`` (its per-item budget of turns)
  and its tokens, cost and tool calls are counted per item: in the item's
  ``usage`` and, summed per batch, against the run's budget (``ItemBatchDone``);
- it posts nothing (a map posts one BATCH_PROGRESS per batch), calls only worker
  tools (each given a ``ToolContext`` naming the map), and starts each item's
  conversation empty (no memory, no user messages, no workstreams, no MCP).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from spindle.shared.contracts.budgets import TurnUsage
from spindle.shared.contracts.errors import ToolError
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.expressions import EvaluationBudget
from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.graphs.node_types import AGENT
from spindle.shared.platform import metrics
from spindle.shared.platform.settings import Settings
from spindle.worker.contracts import ChatMessage, RunRef, ToolCall
from spindle.worker.contracts.param_resolution import resolve_params, validate_params
from spindle.worker.llm.base import LlmProvider, LlmRequest, LlmResponse, ToolSpec
from spindle.worker.llm.prompting import initial_messages
from spindle.worker.llm.structured_output import answer_problems, with_schema_note
from spindle.worker.tools.context import calling_with, tool_context_of
from spindle.worker.tools.registry import get_tool


@dataclass
class ItemUsage:
    """What one item's agent spent: its turns, tokens, cost and tool calls."""

    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    tool_calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The item's ``usage`` in the map's output."""
        return {
            "turns": self.turns,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": round(self.cost_usd, 9),
            "tool_calls": self.tool_calls,
        }


@dataclass
class BatchUsage:
    """The spend of a batch's item agents together (``ItemBatchDone``)."""

    llm: TurnUsage = field(default_factory=TurnUsage)
    tool_calls: int = 0

    def add(self, usage: ItemUsage) -> None:
        self.llm = TurnUsage(
            model=self.llm.model,
            prompt_tokens=self.llm.prompt_tokens + usage.prompt_tokens,
            completion_tokens=self.llm.completion_tokens + usage.completion_tokens,
            cost_usd=round(self.llm.cost_usd + usage.cost_usd, 9),
        )
        self.tool_calls += usage.tool_calls


class ItemAgentFailed(Exception):
    """An item's agent gave no valid answer; the item (not the batch) fails with it.

    Attributes:
        usage: what the item spent before it failed (still counted).
    """

    def __init__(self, message: str, usage: ItemUsage) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass
class ItemAgent:
    """Runs an inline ``agent`` node for one item at a time (see the module docstring)."""

    llm: LlmProvider
    settings: Settings
    run: RunRef
    node: NodeSpec

    async def answer(
        self, scope: dict[str, Any], budget: EvaluationBudget
    ) -> tuple[Any, ItemUsage]:
        """The item's answer (parsed with ``output_schema``) and what it spent.

        Raises:
            ItemAgentFailed: no final answer within ``max_turns``, or one that does
                not match ``output_schema``.
        """
        raw = resolve_params(self.node, scope, templates=AGENT.templates, budget=budget)
        params = validate_params(self.node, raw, AgentParams)
        messages = initial_messages(params, scope)
        if params.output_schema is not None:
            messages = with_schema_note(messages, params.output_schema)
        tools = [_spec(name) for name in params.tools]
        context = tool_context_of(self.run, self.node.id, AGENT.name, scope)
        usage = ItemUsage()
        for _ in range(params.max_turns):
            request = LlmRequest(
                messages=messages, tools=tools, model=params.model, temperature=params.temperature
            )
            response = await self.llm.complete(request)
            self._count(response, params, usage)
            message = response.message.model_copy(update={"role": "assistant"})
            messages.append(message)
            if not message.tool_calls:
                return self._final(params, message.content or "", usage), usage
            with calling_with(context):
                for call in message.tool_calls:
                    usage.tool_calls += 1
                    messages.append(await _called(params, call))
        raise ItemAgentFailed(
            f"agent gave no final answer within max_turns ({params.max_turns})", usage
        )

    def _final(self, params: AgentParams, answer: str, usage: ItemUsage) -> Any:
        if params.output_schema is None:
            return answer
        value, problems = answer_problems(params.output_schema, answer)
        if problems:
            listed = "; ".join(str(problem["message"]) for problem in problems)
            raise ItemAgentFailed(f"the answer does not match output_schema: {listed}", usage)
        return value

    def _count(self, response: LlmResponse, params: AgentParams, usage: ItemUsage) -> None:
        usage.turns += 1
        if response.usage is None:
            return
        model = response.model or params.model or ""
        prices = self.settings.model_prices
        price = prices.get(model) or prices.get("*")
        prompt, completion = response.usage.prompt_tokens, response.usage.completion_tokens
        cost = price.cost(prompt, completion) if price is not None else 0.0
        usage.prompt_tokens += prompt
        usage.completion_tokens += completion
        usage.cost_usd += cost
        metrics.llm_used(self.run.tenant_id, self.run.graph_name, prompt, completion, cost)


def _spec(name: str) -> ToolSpec:
    tool = get_tool(name)  # ToolError (unknown tool): the item fails naming it
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.params_schema())


async def _called(params: AgentParams, call: ToolCall) -> ChatMessage:
    """The tool's result as the model's next message; a failure goes back as text."""
    try:
        if call.name not in params.tools:
            raise ToolError(f"tool '{call.name}' is not offered to this agent")
        result = await get_tool(call.name).call(call.arguments)
        content = orjson.dumps(result, default=str).decode()
    except ToolError as exc:
        content = orjson.dumps({"error": str(exc)}).decode()
    except Exception as exc:  # the model may try again, as a graph's agent does
        content = orjson.dumps({"error": f"{type(exc).__name__}: {exc}"}).decode()
    return ChatMessage(role="tool", content=content, tool_call_id=call.id, name=call.name)


__all__ = ["BatchUsage", "ItemAgent", "ItemAgentFailed", "ItemUsage"]
