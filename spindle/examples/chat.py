"""``chat``: one interactive agent, message after message (``chat.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``chat`` example graph."""
    g = Graph(
        "chat",
        description="A conversation: one interactive agent answers each user message with "
        "the knowledge-base search, the calculator and read_file (the files uploaded to the "
        "run), may delegate to workstreams, and waits (IDLE) for the next message until "
        "COMPLETE (POST /runs/{workflow_id}/complete) or its idle timeout "
        "(docs/conversations.md).",
        input_schema={
            "type": "object",
            "properties": {"message": {"type": "string", "minLength": 1, "title": "Message"}},
            "required": ["message"],
        },
    )
    g.agent(
        "assistant",
        label="Assistant",
        instructions="You are a helpful assistant in a conversation. Look facts up with "
        "search_notes, do arithmetic with calculator, read the files the user uploads with "
        "read_file, and hand longer research to a workstream (launch_workstream); its "
        "result comes back to you.\n",
        prompt="{{ input.message }}",
        tools=[
            "search_notes",
            "calculator",
            "read_file",
            "launch_workstream",
            "steer_workstream",
            "message_workstream",
            "terminate_workstream",
        ],
        max_turns=6,
        interactive=True,
        idle_timeout_seconds=86400,
    )
    return g
