"""``research-agent``: an agent with two tools → output (``research-agent.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``research-agent`` example graph."""
    g = Graph(
        "research-agent",
        description="An agent answers a question with the knowledge-base search and the "
        "calculator (one activity per LLM turn, one per tool call), then the output node "
        "publishes the answer as the run's result.",
        input_schema={
            "type": "object",
            "properties": {"question": {"type": "string", "minLength": 1, "title": "Question"}},
            "required": ["question"],
        },
    )
    researcher = g.agent(
        "researcher",
        label="Research assistant",
        instructions="You are a research assistant. Look facts up with search_notes and do "
        "any arithmetic with calculator, then answer briefly and cite the notes used.\n",
        prompt="{{ input.question }}",
        tools=["search_notes", "calculator"],
        max_turns=4,
    )
    researcher >> g.output("answer", select="researcher")
    return g
