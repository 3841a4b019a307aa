"""The ``llm_turn`` activity's side of an agent's memory (docs/conversations.md, Memory).

Each turn: the turn's new messages go into the agent's memory log (the first turn
of a visit adds the visit's user prompt first), the context policy decides what
of the log the model is given (dropping or summarizing the oldest whole
exchanges), and after the model answers its reply is stored too, so the next
visit, the next run of the thread, or ``GET /runs/{id}/conversation`` sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from spindle.shared.contracts.budgets import TurnUsage
from spindle.shared.contracts.errors import NodeFailed, to_application_error
from spindle.shared.contracts.memory import ContextStrategy, estimate_tokens
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.node_params import AgentParams
from spindle.shared.platform.settings import Settings
from spindle.shared.store.agent_memory import (
    AgentMemory,
    Entry,
    Fields,
    MemoryMeta,
    run_index_key,
    run_memory_base,
    thread_index_key,
    thread_memory_base,
)
from spindle.worker.contracts import ChatMessage, LlmTurnInput
from spindle.worker.llm.base import LlmProvider, LlmRequest, LlmResponse
from spindle.worker.llm.context_policy import (
    cut_point,
    resolve_policy,
    summary_message,
    summary_request,
)
from spindle.worker.llm.prompting import initial_messages
from spindle.worker.posting.poster import MessagePoster


@dataclass
class Remembered:
    """What one turn is given, and where its reply goes in the log."""

    base: str
    reply_seq: int
    messages: list[ChatMessage]
    summary: LlmResponse | None = None


def memory_base(turn: LlmTurnInput) -> str:
    """The key prefix of the turn's memory: the thread's or the run's."""
    run = turn.execution.run
    if turn.thread is not None:
        return thread_memory_base(run.tenant_id, turn.thread, turn.execution.node.id)
    assert turn.memory_key is not None
    return run_memory_base(run.stream_id, run.workflow_id, turn.memory_key)


def _kind(turn: LlmTurnInput) -> str:
    if turn.thread is not None:
        return "thread"
    return "run" if turn.memory_key == turn.execution.node.id else "per_visit"


def _system(
    turn: LlmTurnInput, params: AgentParams, meta: MemoryMeta, visit: str
) -> tuple[str, str]:
    """The system prompt (and the visit that set it): the one the workflow sent in
    this visit (a workstream's), else the node's instructions."""
    # A named system message is a notice (an upload, a child's report), not the prompt.
    sent = [m for m in turn.messages if m.role == "system" and not m.name]
    if sent:
        return sent[-1].content or "", visit
    if meta.system_visit == visit and meta.system is not None:
        return meta.system, visit
    return params.instructions, ""


class MemoryKeeper:
    """Stores a turn's messages and applies the context policy.

    Args:
        memory: the memory logs.
        llm: the model that writes summaries (the agent's model).
        settings: the worker's settings (the policy's defaults).
    """

    def __init__(self, memory: AgentMemory, llm: LlmProvider, settings: Settings) -> None:
        self.memory = memory
        self.llm = llm
        self.settings = settings

    async def prepare(
        self, turn: LlmTurnInput, params: AgentParams, poster: MessagePoster
    ) -> Remembered:
        """Store the turn's new messages; what the model is given under the policy."""
        execution = turn.execution
        run = execution.run
        base = memory_base(turn)
        visit = f"{run.workflow_id}:{turn.conversation}"
        has_user = any(m.role == "user" for m in turn.messages)
        opening = (
            []
            if has_user or turn.stored > 0
            else [initial_messages(params, execution.state)[1].model_dump(mode="json")]
        )
        start, meta = await self.memory.begin_visit(base, visit, opening)
        system, system_visit = _system(turn, params, meta, visit)
        new = [m.model_dump(mode="json") for m in turn.messages]
        extra: Fields = {
            "system": system,
            "system_visit": system_visit,
            "memory": _kind(turn),
        }
        length = await self.memory.write(base, start + turn.stored, new, extra=extra)
        await self.memory.index(
            run_index_key(run.stream_id),
            run.workstream_id,
            execution.node.id,
            base,
            thread_index_key(run.tenant_id, turn.thread) if turn.thread is not None else None,
        )
        loaded = await self.memory.entries(base, meta.dropped, length)
        if len(loaded) < length - meta.dropped:
            # Expired or evicted: the agent cannot go on without its conversation.
            raise to_application_error(
                NodeFailed(
                    f"{length - meta.dropped - len(loaded)} of {length - meta.dropped} "
                    f"messages of agent '{execution.node.id}''s memory are gone",
                    context={"key": base, "dropped": meta.dropped, "length": length},
                )
            )
        live = [e for e in loaded if e.message.get("role") != "system" or e.message.get("name")]
        remembered = Remembered(
            base=base, reply_seq=start + turn.stored + len(turn.messages), messages=[]
        )
        summary, covered = await self._apply_policy(
            turn, params, poster, remembered=remembered, live=live, meta=meta, system=system
        )
        head = [ChatMessage(role="system", content=system)]
        if summary:
            head.append(summary_message(summary, covered))
        remembered.messages = [*head, *(ChatMessage.model_validate(e.message) for e in live)]
        return remembered

    async def _apply_policy(
        self,
        turn: LlmTurnInput,
        params: AgentParams,
        poster: MessagePoster,
        *,
        remembered: Remembered,
        live: list[Entry],
        meta: MemoryMeta,
        system: str,
    ) -> tuple[str | None, int]:
        """Cut ``live`` (in place) to the policy; the summary and what it covers."""
        policy = resolve_policy(params.context, self.settings)
        summary, covered = meta.summary, meta.covered
        fixed = estimate_tokens({"content": system})
        if summary:
            fixed += estimate_tokens(summary_message(summary, covered).model_dump())
        tokens = [e.tokens for e in live]
        roles = [str(e.message.get("role")) for e in live]
        cut = cut_point(tokens, roles, policy.max_tokens - fixed)
        if cut == 0:
            return summary, covered
        if policy.strategy == ContextStrategy.SUMMARIZE:
            cut = cut_point(tokens, roles, policy.max_tokens // 2 - fixed)
            dropped = [ChatMessage.model_validate(e.message) for e in live[:cut]]
            response = await self.llm.complete(
                LlmRequest(
                    messages=summary_request(summary, dropped),
                    model=params.model,
                    temperature=params.temperature,
                )
            )
            remembered.summary = response
            summary = response.message.content or ""
        covered += cut
        start = live[cut].seq if cut < len(live) else live[-1].seq + 1
        await self.memory.advance(remembered.base, start, summary, covered)
        del live[:cut]
        if remembered.summary is not None:
            await poster.post(
                AgentMessageType.UPDATE,
                f"Summarized {cut} earlier messages of {turn.execution.node.id}'s conversation",
                details={
                    "node_id": turn.execution.node.id,
                    "turn": turn.turn,
                    "summary": summary,
                    "covered": covered,
                    "dropped": start,
                },
            )
        return summary, covered

    async def keep_reply(self, remembered: Remembered, message: ChatMessage) -> None:
        """Store the model's reply where the workflow's next turn would send it."""
        await self.memory.write(
            remembered.base, remembered.reply_seq, [message.model_dump(mode="json")]
        )


def merge_usage(first: TurnUsage | None, second: TurnUsage | None) -> TurnUsage | None:
    """One turn's spend with its summary's (budgets count both)."""
    if first is None or second is None:
        return first or second
    return TurnUsage(
        model=first.model,
        prompt_tokens=first.prompt_tokens + second.prompt_tokens,
        completion_tokens=first.completion_tokens + second.completion_tokens,
        cost_usd=round(first.cost_usd + second.cost_usd, 9),
    )
