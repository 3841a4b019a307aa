"""``delegation``: a lead agent hands its research to a workstream (``delegation.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``delegation`` example graph."""
    g = Graph(
        "delegation",
        description="A lead agent delegates its research to a workstream with its "
        "launch_workstream tool: a child run with its own agent and deadline, whose messages "
        "stream on this run's stream attributed to `ws-1`. The lead answers at once that the "
        "research is under way, waits (IDLE, naming ws-1) while the child works, hears its "
        "result as a system message at its next turn boundary, and answers from it. The "
        "child's answer is merged as the artifact files/ws-1/result.md; the output node "
        "publishes the lead's final answer.",
        input_schema={
            "type": "object",
            "properties": {"topic": {"type": "string", "minLength": 1}},
            "required": ["topic"],
        },
    )
    lead = g.agent(
        "lead",
        label="Lead",
        instructions="You lead a research task. Do not research it yourself: delegate it "
        'with launch_workstream (label "research", deadline_seconds 120, agent {"tools": '
        '["search_notes"], "max_turns": 4}). Its result reaches you as a system message '
        'starting "[workstream result]"; then answer from it briefly, citing what it found.\n',
        prompt="Find what our notes say about {{ input.topic }}",
        tools=["launch_workstream"],
        max_turns=4,
    )
    lead >> g.output("report", select="{answer: lead}", message="{{ lead }}")
    return g
