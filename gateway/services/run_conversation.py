"""What an agent's model is given, and a conversation's shared memory (docs/conversations.md).

``GET /runs/{workflow_id}/conversation`` reads the agent's memory log
(``spindle.shared.store.agent_memory``): the system prompt, the summary of what was
dropped (if any) and the messages still in the model's view, which is what the
agent's next LLM turn is given before that turn's own policy cut (after a final
answer: what its last turn was given, plus the answer). ``GET /conversations/{id}``
lists a conversation's runs and its agents' shared memories.
"""

from __future__ import annotations

from datetime import datetime

from spindle.gateway.runs.conversations import conversation_runs
from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.errors import NotFound
from spindle.shared.contracts.memory import (
    ConversationView,
    MemoryInfo,
    MemoryMessage,
    ThreadView,
    estimate_tokens,
)
from spindle.shared.store.agent_memory import (
    AgentMemory,
    run_index_key,
    thread_index_key,
)

SUMMARY_HEADER = "Summary of the earlier conversation"  # as the worker's context policy writes it


def _memory(caller: Caller) -> AgentMemory:
    return AgentMemory(caller.state.bus.redis, caller.state.settings.history_ttl_days * 86_400)


def _message(raw: dict[str, object], seq: int, ts: str | None) -> MemoryMessage:
    calls = raw.get("tool_calls")
    return MemoryMessage.model_validate(
        {
            "role": raw.get("role"),
            "content": raw.get("content"),
            "name": raw.get("name"),
            "tool_calls": calls if isinstance(calls, list) else [],
            "tool_call_id": raw.get("tool_call_id"),
            "seq": seq,
            "ts": datetime.fromisoformat(ts) if ts else None,
        }
    )


async def run_conversation(
    caller: Caller,
    workflow_id: str,
    *,
    node: str | None,
    workstream: str,
    cursor: int,
    limit: int,
) -> ConversationView:
    """The conversation an agent of the run is given, paged from ``cursor``.

    Args:
        caller: who asks (the route checked that the run is the caller's).
        workflow_id: the run (its stream holds its workstreams' agents too).
        node: the agent node (a workstream's agent: its launch id); default: the
            workstream's latest agent.
        workstream: ``main`` or a launch id.
        cursor: the position in the view to start at (``next_cursor`` of a page).
        limit: messages per page.

    Raises:
        NotFound: the run has no such agent conversation (none ran yet, or it expired).
    """
    memory = _memory(caller)
    found, base = await memory.lookup(run_index_key(workflow_id), workstream, node)
    if not base:
        what = f"agent '{node}'" if node else "agent"
        raise NotFound(
            f"run '{workflow_id}' has no {what} conversation in workstream '{workstream}'",
            context={"workflow_id": workflow_id, "node": node, "workstream": workstream},
        )
    meta = await memory.meta(base)
    view: list[MemoryMessage] = [
        MemoryMessage(role="system", content=meta.system or "", seq=-1),
    ]
    if meta.summary:
        view.append(
            MemoryMessage(
                role="system",
                content=f"{SUMMARY_HEADER} ({meta.covered} messages):\n{meta.summary}",
                seq=-1,
            )
        )
    tokens = sum(estimate_tokens(m.model_dump()) for m in view)
    for entry in await memory.entries(base, meta.dropped, meta.length):
        if entry.message.get("role") == "system" and not entry.message.get("name"):
            continue  # a workstream's system prompt: the view's first message
        view.append(_message(entry.message, entry.seq, entry.ts))
        tokens += entry.tokens
    page = view[cursor : cursor + limit]
    more = cursor + limit < len(view)
    return ConversationView(
        node=found,
        workstream=workstream,
        memory=meta.kind,
        messages=page,
        summary=meta.summary,
        dropped=meta.dropped,
        tokens=tokens,
        total=len(view),
        next_cursor=str(cursor + limit) if more else None,
    )


async def thread(caller: Caller, conversation_id: str) -> ThreadView:
    """A conversation's runs and its agents' shared memories.

    Raises:
        NotFound: no conversation of that id in the caller's tenant.
    """
    runs = await conversation_runs(
        caller.state.temporal, tenant_id=caller.tenant_id, conversation_id=conversation_id
    )
    memory = _memory(caller)
    infos: list[MemoryInfo] = []
    nodes = await memory.thread_nodes(thread_index_key(caller.tenant_id, conversation_id))
    for node, base in sorted(nodes.items()):
        meta = await memory.meta(base)
        infos.append(
            MemoryInfo(node=node, messages=meta.length, dropped=meta.dropped, summary=meta.summary)
        )
    return ThreadView(
        conversation_id=conversation_id,
        current=runs.current,
        runs=[r.model_dump(mode="json") for r in runs.runs],
        history=runs.history,
        memory=infos,
    )
