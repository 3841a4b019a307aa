"""What a child workstream's activities see, and what each exchange sends (pure).

The child's agent runs as a synthetic ``agent`` node whose id is the launch id.
Its system prompt and task/messages travel in the conversation (not in
``params.instructions``/``params.prompt``, whose ``{{ }}`` templates the
``llm_turn`` activity renders: a task's text must reach the model as is).

Its conversation is its memory (``agent_loop.MEMORY_PATCH``): stored by reference,
under the same context policy as an agent node's (``params.context``, default the
``agent_context_*`` settings; docs/conversations.md, Memory). Each exchange sends
only its opening: the system prompt, restating the standing instructions, and the
message. Histories from before the memory replay with ``bounded``, the old cut.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from spindle.shared.contracts.graph_spec import NodeSpec
    from spindle.shared.contracts.workstreams import WorkstreamInput
    from spindle.shared.graphs.node_params import AgentParams
    from spindle.worker.contracts import ChatMessage, NodeExecution, RunRef

# The old cut (histories from before MEMORY_PATCH): about this many messages.
MAX_CONVERSATION = 40
STANDING_HEADER = "Standing instructions so far:"


def child_run_ref(data: WorkstreamInput, workflow_id: str, run_id: str) -> RunRef:
    """The child's run: its own ids, the parent's stream, ``workstream_id = launch_id``."""
    return RunRef(
        workflow_id=workflow_id,
        run_id=run_id,
        stream_id=data.stream_id,
        workstream_id=data.launch_id,
        tenant_id=data.tenant_id,
        graph_name=data.graph_name,
        user_id=data.user_id,
        replay=data.replay,  # a recorded fork's calls (None: every other run)
    )


def system_prompt(data: WorkstreamInput) -> str:
    """The launch's system prompt, else an agent node's default instructions."""
    system = data.launch.agent.system
    return system or str(AgentParams.model_fields["instructions"].default)


def child_execution(
    data: WorkstreamInput, run: RunRef, *, visit: int, prompt: str, started_at: str
) -> NodeExecution:
    """The agent as ``llm_turn``/``tool_call`` see it (``visit``: the exchange)."""
    agent = data.launch.agent
    params: dict[str, Any] = {"tools": list(agent.tools), "max_turns": agent.max_turns}
    if agent.model is not None:
        params["model"] = agent.model
    if agent.context is not None:
        params["context"] = agent.context.model_dump(mode="json", exclude_none=True)
    node = NodeSpec(id=data.launch_id, type="agent", label=data.launch.label, params=params)
    return NodeExecution(
        run=run, node=node, visit=visit, state={"input": prompt}, started_at=started_at
    )


def opening(system: str, task: str) -> list[ChatMessage]:
    """The conversation's start: the system prompt and the task."""
    return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=task)]


def memory_opening(
    system: str, instructions: list[str], messages: list[ChatMessage]
) -> list[ChatMessage]:
    """An exchange's messages when the conversation is the agent's memory: the system
    prompt, then ``messages`` (what came since the last exchange, and the message).

    The standing instructions are restated in the system prompt, which the
    context policy always keeps, so a steer still applies however much of the
    conversation was dropped or summarized.
    """
    if instructions:
        system = "\n".join([system, "", STANDING_HEADER, *instructions])
    return [ChatMessage(role="system", content=system), *messages]


def bounded(
    conversation: list[ChatMessage], instructions: list[str], limit: int = MAX_CONVERSATION
) -> list[ChatMessage]:
    """At most about ``limit`` messages: the opening, then the newest messages
    (the cut of histories from before the memory; ``memory_opening`` since).

    The kept tail never starts with a tool result (its assistant call would be
    gone). Standing instructions whose message was dropped are restated in one
    user message after the opening, so they keep applying.
    """
    if len(conversation) <= limit:
        return list(conversation)
    head = conversation[:2]
    tail = conversation[len(conversation) - (limit - 3) :]
    while tail and tail[0].role == "tool":
        tail = tail[1:]
    kept = {line for m in tail if m.role == "user" for line in (m.content or "").splitlines()}
    dropped = [i for i in instructions if i not in kept]
    restated = (
        [ChatMessage(role="user", content="\n".join([STANDING_HEADER, *dropped]))]
        if dropped
        else []
    )
    return [*head, *restated, *tail]
