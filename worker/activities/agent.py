"""``llm_turn`` and ``tool_call``: the activities of an ``agent`` node's loop.

The workflow keeps the conversation and runs one ``llm_turn`` per model turn and
one ``tool_call`` per tool the model asks for (in parallel). A turn that calls
tools posts THOUGHT; the final turn posts ANSWER and archives the node's report.
While the model writes, its tokens are posted as STREAMING_CHUNK messages with
the activity's id (``spindle.worker.posting.chunk_poster``), which the THOUGHT/ANSWER
of the same id supersedes.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from temporalio import activity

from spindle.shared.contracts.budgets import TurnUsage
from spindle.shared.contracts.errors import (
    LlmRefused,
    NodeFailed,
    ToolError,
    to_application_error,
)
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import NodeStatus
from spindle.shared.graphs.expressions import DEFAULT_NODE_STEPS
from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.graphs.node_types import AGENT
from spindle.shared.platform import metrics
from spindle.shared.platform.logging_setup import bind_activity_log_context
from spindle.shared.platform.settings import Settings
from spindle.shared.store.agent_memory import AgentMemory
from spindle.shared.store.call_records import tool_key
from spindle.shared.store.conversations import ConversationStore, conversation_key
from spindle.shared.store.file_store import FileStore
from spindle.worker.activities.agent_memory import MemoryKeeper, Remembered, merge_usage
from spindle.worker.activities.call_replay import (
    archive_with,
    replayed,
    replayed_turn,
    turn_key,
    turn_record,
)
from spindle.worker.activities.heartbeat import heartbeating
from spindle.worker.activities.recorder import (
    build_report,
    elapsed_ms_since,
    input_envelope,
    output_envelope,
)
from spindle.worker.activities.run_activities import RunActivities
from spindle.worker.contracts import (
    LLM_TURN,
    TOOL_CALL,
    ChatMessage,
    LlmTurnInput,
    LlmTurnResult,
    NodeExecution,
    ToolCall,
    ToolCallInput,
    ToolCallResult,
)
from spindle.worker.contracts.param_resolution import (
    invalid_params,
    node_budget,
    off_loop,
    resolve_params,
    validate_params,
)
from spindle.worker.contracts.workstream_tools import WORKSTREAM_TOOL_SPECS
from spindle.worker.llm.base import (
    LlmProvider,
    LlmRequest,
    LlmResponse,
    ToolSpec,
    stream_events,
)
from spindle.worker.llm.chunk_batcher import ChunkBatcher
from spindle.worker.llm.prompting import with_opening
from spindle.worker.llm.structured_output import (
    answer_problems,
    canonical,
    output_invalid,
    retry_messages,
    with_schema_note,
)
from spindle.worker.llm.token_relay import relay_tokens
from spindle.worker.posting.chunk_poster import ChunkPoster
from spindle.worker.posting.poster import MessagePoster
from spindle.worker.tools.context import ToolContext, calling_with, tool_context_of
from spindle.worker.tools.mcp_client import McpToolCache, split_name
from spindle.worker.tools.plans import plan_poster
from spindle.worker.tools.registry import get_tool
from spindle.worker.tools.run_files import RunFiles, reading_files

if TYPE_CHECKING:
    from spindle.shared.bus.message_bus import MessageBus
    from spindle.shared.store.archive import RunArchive

logger = logging.getLogger(__name__)


def agent_params(execution: NodeExecution, steps: int | None = None) -> AgentParams:
    """The agent node's params, resolved and validated (``InvalidParams`` if bad),
    its templates within ``steps`` evaluation steps together (the
    ``expression_node_steps`` setting; None: its default)."""
    node = execution.node
    budget = node_budget(node.id, steps or DEFAULT_NODE_STEPS)
    raw = resolve_params(node, execution.state, templates=AGENT.templates, budget=budget)
    return validate_params(node, raw, AgentParams)


def tool_specs(execution: NodeExecution, names: list[str]) -> list[ToolSpec]:
    specs = []
    for name in names:
        if name in WORKSTREAM_TOOL_SPECS:  # answered by the workflow, not by a worker tool
            specs.append(WORKSTREAM_TOOL_SPECS[name])
            continue
        try:
            tool = get_tool(name)
        except ToolError as exc:
            raise invalid_params(
                f"node '{execution.node.id}': {exc}",
                [{"node": execution.node.id, "field": "params.tools", "rule": "unknown_tool"}],
            ) from exc
        specs.append(
            ToolSpec(name=tool.name, description=tool.description, parameters=tool.params_schema())
        )
    return specs


async def mcp_tool_specs(params: AgentParams, cache: McpToolCache) -> list[ToolSpec]:
    """The tools of the node's MCP servers, as ``<server>__<tool>`` (cached per worker).

    Raises:
        RuntimeError: a server could not be listed (retryable: it may be back soon).
    """
    specs: list[ToolSpec] = []
    for server in params.mcp_servers:
        try:
            tools = await cache.tools(server)
        except ToolError as exc:
            raise RuntimeError(str(exc)) from exc
        specs.extend(
            ToolSpec(name=t.qualified, description=t.description, parameters=t.input_schema)
            for t in tools
        )
    return specs


async def _run_tool(params: AgentParams, call: ToolCall, cache: McpToolCache) -> Any:
    """A registered tool (``params.tools``) or an MCP server's (``params.mcp_servers``)."""
    if params.mcp_servers and split_name(call.name) is not None:
        return await cache.call(params.mcp_servers, call.name, call.arguments)
    if call.name not in params.tools:
        raise ToolError(f"tool '{call.name}' is not offered to this agent")
    return await get_tool(call.name).call(call.arguments)


def _prompt_of(messages: list[ChatMessage], remembered: bool) -> dict[str, Any] | None:
    """The report's input: the user prompt (with a memory: the latest user message)."""
    if remembered:
        users = [m for m in messages if m.role == "user"]
        return {"prompt": users[-1].content} if users else None
    return {"prompt": messages[1].content} if len(messages) > 1 else None


def _noted(messages: list[ChatMessage], params: AgentParams) -> list[ChatMessage]:
    """The request's messages; with ``output_schema``, the model is told the schema."""
    if params.output_schema is None:
        return messages
    return with_schema_note(messages, params.output_schema)


def _output(params: AgentParams, answer: str) -> Any:
    """The node's output: the answer, or with ``output_schema`` its parsed JSON."""
    return orjson.loads(answer) if params.output_schema is not None else answer


def _tool_context(call_input: ToolCallInput, poster: MessagePoster) -> ToolContext:
    """The call's ``ToolContext``: the run, the agent node, its PLAN poster (seed 004)."""
    execution = call_input.execution
    node = execution.node
    plans = plan_poster(poster, node.id, turn=call_input.turn)
    return tool_context_of(execution.run, node.id, node.type, execution.state, post_plan=plans)


def _ids(execution: NodeExecution) -> dict[str, Any]:
    """Seed 004: an agent's message names the agent and its tenant in ``meta``."""
    return {"agentId": execution.node.id, "tenantId": execution.run.tenant_id}


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class AgentActivities(RunActivities):
    """LLM turns and tool calls, with the bus, archive, LLM provider and settings injected.

    Args:
        settings: the worker's settings (among them ``llm_streaming``, whether the
            model's tokens are posted as STREAMING_CHUNK messages, and how they are
            batched: ``stream_chunk_interval_ms``, ``stream_chunk_max_chars``).
        mcp: the worker's MCP tool lists (one per worker process: ``build_workers``);
            default: a cache of this object's own, with ``settings``.
    """

    def __init__(
        self,
        bus: MessageBus,
        archive: RunArchive | None,
        llm: LlmProvider,
        *,
        settings: Settings,
        mcp: McpToolCache | None = None,
    ) -> None:
        super().__init__(bus, archive, settings=settings)
        self.mcp = mcp if mcp is not None else McpToolCache(settings)
        self.llm = llm
        self.conversations = ConversationStore(bus.redis, settings.history_ttl_days * 86_400)
        self.memory = MemoryKeeper(
            AgentMemory(bus.redis, settings.history_ttl_days * 86_400), llm, settings
        )
        self.files = FileStore(archive.database) if archive is not None else None

    async def _conversation(self, turn: LlmTurnInput) -> list[ChatMessage]:
        """The whole conversation so far: stored earlier messages, then the new ones."""
        if turn.conversation is None:
            return turn.messages
        run = turn.execution.run
        key = conversation_key(run.stream_id, run.workflow_id, turn.conversation)
        try:
            earlier = await self.conversations.load(key, turn.stored)
        except NodeFailed as exc:
            raise to_application_error(exc) from exc
        await self.conversations.save(key, turn.stored, [m.model_dump() for m in turn.messages])
        return [*(ChatMessage.model_validate(m) for m in earlier), *turn.messages]

    async def _ask(self, request: LlmRequest, poster: MessagePoster) -> LlmResponse:
        """The model's reply; its tokens are streamed to the run as they come."""
        settings = self.settings
        if not settings.llm_streaming:
            return await self.llm.complete(request)
        sink = ChunkPoster(poster)
        await sink.open()
        batcher = ChunkBatcher(
            interval=settings.stream_chunk_interval_ms / 1000,
            max_chars=settings.stream_chunk_max_chars,
        )
        return await relay_tokens(stream_events(self.llm, request), batcher, sink)

    @activity.defn(name=LLM_TURN)
    async def llm_turn(self, turn: LlmTurnInput) -> LlmTurnResult:
        """Ask the model for its next message; post THOUGHT (tool calls) or ANSWER."""
        execution = turn.execution
        node = execution.node
        bind_activity_log_context(node_id=node.id, node_type=node.type)
        poster = self._poster(execution.run)
        await poster.announce_retry(f"agent {node.id} (turn {turn.turn})")
        await self.tasks.node_started(execution)
        if turn.turn == 1:
            await self.recorder.node_started(execution)  # currentNodeId in the archive
        # Its templates off the event loop: other runs' activities go on meanwhile.
        params = await off_loop(agent_params, execution, self.settings.expression_node_steps)
        messages, remembered = await self._messages_for(turn, params, poster)
        request = LlmRequest(
            messages=_noted(messages, params),
            tools=tool_specs(execution, params.tools) + await mcp_tool_specs(params, self.mcp),
            model=params.model,
            temperature=params.temperature,
        )
        # Recorded, or in a recorded fork answered from the source's record (call_replay).
        plan = await self.calls.begin(execution.run, turn_key(node.id, request))
        if plan.hit:
            message, usage, details = replayed_turn(plan, node.id, turn.turn)
        else:
            message, usage, details = await self._live_turn(turn, params, request, poster)
        record = self.calls.record(plan, turn_record(message, usage, details))
        details.update(plan.details())
        if remembered is not None:
            # An attempt left behind must not overwrite the reply the run goes on with.
            await poster.check_current()
            await self.memory.keep_reply(remembered, message)
            if remembered.summary is not None:
                usage = merge_usage(usage, self._usage(execution, remembered.summary))

        if message.tool_calls:
            names = ", ".join(c.name for c in message.tool_calls)
            details["tool_calls"] = [c.model_dump() for c in message.tool_calls]
            await poster.post(
                AgentMessageType.THOUGHT,
                message.content or f"Calling tools: {names}",
                details=details,
            )
            await archive_with(poster, self.recorder, record)
            return LlmTurnResult(message=message, final=False, usage=usage)

        answer = message.content or ""
        await poster.post(AgentMessageType.ANSWER, answer, details=details)
        # Posting checked that no newer attempt runs; check again before the report.
        await poster.check_current()
        report = build_report(
            execution,
            NodeStatus.SUCCESS,
            duration_ms=elapsed_ms_since(execution.started_at),
            output=_output(params, answer),
        )
        await self.recorder.save_report(
            execution,
            report,
            input=input_envelope(
                execution,
                _prompt_of(request.messages, remembered is not None),
            ),
            output=output_envelope(execution, _output(params, answer), meta=_ids(execution)),
        )
        await archive_with(poster, self.recorder, record)
        await self.tasks.node_finished(execution, _output(params, answer))
        return LlmTurnResult(message=message, final=True, report=report, usage=usage)

    async def _live_turn(
        self, turn: LlmTurnInput, params: AgentParams, request: LlmRequest, poster: MessagePoster
    ) -> tuple[ChatMessage, TurnUsage | None, dict[str, Any]]:
        """The model's message for ``request`` (checked against ``output_schema``),
        its spend, and the details its THOUGHT/ANSWER carries."""
        node = turn.execution.node
        started = time.monotonic()
        try:
            async with heartbeating(node.id, turn.turn):
                response = await self._ask(request, poster)
        except LlmRefused as exc:
            # Same request, same refusal: fail the node now instead of retrying.
            raise to_application_error(exc) from exc
        llm_ms = round((time.monotonic() - started) * 1000, 1)
        message = response.message.model_copy(update={"role": "assistant"})
        details: dict[str, Any] = {"node_id": node.id, "turn": turn.turn, "model": response.model}
        if response.usage is not None:
            details["usage"] = response.usage.model_dump()
        details["llm_ms"] = llm_ms
        usage = self._usage(turn.execution, response)
        if params.output_schema is not None and not message.tool_calls:
            message, usage = await self._structured(turn, params, request, message, usage)
        return message, usage, details

    async def _messages_for(
        self, turn: LlmTurnInput, params: AgentParams, poster: MessagePoster
    ) -> tuple[list[ChatMessage], Remembered | None]:
        """What the model is given this turn, and the agent's memory when it has one."""
        if turn.memory_key is None:
            state = turn.execution.state
            return with_opening(params, state, await self._conversation(turn)), None
        # The agent's memory under its context policy (docs/conversations.md, Memory).
        remembered = await self.memory.prepare(turn, params, poster)
        return remembered.messages, remembered

    async def _structured(
        self,
        turn: LlmTurnInput,
        params: AgentParams,
        request: LlmRequest,
        message: ChatMessage,
        usage: TurnUsage | None,
    ) -> tuple[ChatMessage, TurnUsage | None]:
        """A final answer checked against ``params.output_schema``: asked once more with
        the violations, then ``AgentOutputInvalid`` (docs/graphs/node-types.md)."""
        schema = params.output_schema or {}
        node = turn.execution.node
        value, problems = answer_problems(schema, message.content or "")
        if problems:
            retry = request.model_copy(
                update={"messages": retry_messages(request.messages, message, problems)}
            )
            try:
                async with heartbeating(node.id, turn.turn):
                    response = await self._ask(retry, self._poster(turn.execution.run))
            except LlmRefused as exc:
                raise to_application_error(exc) from exc
            usage = merge_usage(usage, self._usage(turn.execution, response))
            message = response.message.model_copy(update={"role": "assistant"})
            value, problems = answer_problems(schema, message.content or "")
            if message.tool_calls:
                problems = [
                    {"field": "output", "rule": "final", "message": "output: tools asked again"}
                ]
            if problems:
                raise to_application_error(output_invalid(node.id, problems))
        return message.model_copy(update={"content": canonical(value)}), usage

    def _usage(self, execution: NodeExecution, response: LlmResponse) -> TurnUsage | None:
        """The turn's tokens and cost (priced here, so the workflow counts a recorded figure)."""
        if response.usage is None:
            return None
        model = response.model or agent_params(execution).model or ""
        prices = self.settings.model_prices
        price = prices.get(model) or prices.get("*")
        prompt, completion = response.usage.prompt_tokens, response.usage.completion_tokens
        cost = round(price.cost(prompt, completion), 9) if price is not None else 0.0
        run = execution.run
        metrics.llm_used(run.tenant_id, run.graph_name, prompt, completion, cost)
        return TurnUsage(
            model=model, prompt_tokens=prompt, completion_tokens=completion, cost_usd=cost
        )

    @activity.defn(name=TOOL_CALL)
    async def tool_call(self, call_input: ToolCallInput) -> ToolCallResult:
        """Run one tool the model asked for; errors go back to the model as text."""
        execution = call_input.execution
        call = call_input.call
        bind_activity_log_context(node_id=execution.node.id, node_type=execution.node.type)
        poster = self._poster(execution.run)
        await poster.announce_retry(f"tool {call.name} for {execution.node.id}")
        # Recorded, or in a recorded fork answered from the source's record (call_replay).
        plan = await self.calls.begin(
            execution.run, tool_key(execution.node.id, call.name, call.arguments)
        )
        recorded = plan.details()
        await poster.post(
            AgentMessageType.UPDATE,
            f"Using tool {call.name}",
            details={
                "node_id": execution.node.id,
                "turn": call_input.turn,
                "call_id": call.id,
                "tool": call.name,
                "arguments": call.arguments,
                **recorded,
            },
        )
        if plan.hit:
            answer = replayed(plan)
            outcome = ToolCallResult(
                call_id=call.id, name=call.name, content=answer["content"], ok=answer["ok"]
            )
        else:
            outcome = await self._live_tool(call_input, poster)
            metrics.tool_called(execution.run.tenant_id, execution.run.graph_name)
        record = self.calls.record(plan, {"content": outcome.content, "ok": outcome.ok})
        await self._tool_posts(call_input, outcome, poster, recorded)
        await archive_with(poster, self.recorder, record)
        return outcome

    async def _live_tool(self, call_input: ToolCallInput, poster: MessagePoster) -> ToolCallResult:
        """The tool's result, called for real; errors go back to the model as text."""
        execution = call_input.execution
        call = call_input.call
        params = await off_loop(agent_params, execution, self.settings.expression_node_steps)
        run = execution.run
        files = RunFiles(
            self.files, run.tenant_id, run.workflow_id, self.settings.read_file_max_bytes
        )
        context = _tool_context(call_input, poster)
        try:
            # read_file reads only this run's files (worker/tools/run_files.py); a
            # tool taking a ToolContext gets this call's (docs/graphs/tools.md).
            with reading_files(files), calling_with(context):
                async with heartbeating(execution.node.id, call.id):
                    result = await _run_tool(params, call, self.mcp)
        except ToolError as exc:
            outcome = ToolCallResult(
                call_id=call.id, name=call.name, content=_json({"error": str(exc)}), ok=False
            )
        except Exception as exc:
            logger.warning("tool %s failed in %s: %s", call.name, execution.node.id, exc)
            outcome = ToolCallResult(
                call_id=call.id,
                name=call.name,
                content=_json({"error": f"{type(exc).__name__}: {exc}"}),
                ok=False,
            )
        else:
            outcome = ToolCallResult(call_id=call.id, name=call.name, content=_json(result))
        return outcome

    async def _tool_posts(
        self,
        call_input: ToolCallInput,
        outcome: ToolCallResult,
        poster: MessagePoster,
        recorded: dict[str, Any],
    ) -> None:
        """What the tool returned, on the run's stream."""
        execution = call_input.execution
        call = call_input.call
        if call_input.batch_size > 1:
            # Seed 002's BATCH_PROGRESS: where a batch of parallel tool calls stands.
            await poster.post(
                AgentMessageType.BATCH_PROGRESS,
                f"tool {call_input.batch_index} of {call_input.batch_size} ({call.name}) "
                f"{'done' if outcome.ok else 'failed'}",
                details={
                    "node_id": execution.node.id,
                    "turn": call_input.turn,
                    "call_id": call.id,
                    "tool": call.name,
                    "batch_index": call_input.batch_index,
                    "batch_size": call_input.batch_size,
                    "ok": outcome.ok,
                    "result": outcome.content,
                    **recorded,
                },
            )
        else:
            # What the tool returned, on the stream (AG-UI's TOOL_CALL_RESULT,
            # docs/protocols/agui.md); a batch carries it on its BATCH_PROGRESS.
            await poster.post(
                AgentMessageType.UPDATE,
                f"Tool {call.name} {'returned' if outcome.ok else 'failed'}",
                details={
                    "node_id": execution.node.id,
                    "turn": call_input.turn,
                    "call_id": call.id,
                    "tool": call.name,
                    "ok": outcome.ok,
                    "result": outcome.content,
                    **recorded,
                },
            )


def tool_message(result: ToolCallResult) -> ChatMessage:
    """The chat message that gives a tool's result back to the model."""
    return ChatMessage(
        role="tool", content=result.content, tool_call_id=result.call_id, name=result.name
    )
