"""``clarify``: one question to the user, then the answer (``clarify.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``clarify`` example graph."""
    g = Graph(
        "clarify",
        description="Asks the user one question about the request (the run waits for a "
        "person: an A2A task in input-required), then completes with the request and the "
        "answer. Answer it with a message on the same task (A2A taskId) or "
        "POST /runs/{id}/input.",
        input_schema={
            "type": "object",
            "properties": {"request": {"type": "string", "minLength": 1}},
            "required": ["request"],
        },
    )
    ask = g.prompt(
        "ask",
        label="Ask the user",
        title="One question first",
        prompt="Before I answer '{{ input.request }}': what is it for?",
    )
    ask >> g.output(
        "answer",
        select="{request: input.request, clarification: ask.ask_response}",
        message="Noted: '{{ input.request }}' is for {{ ask.ask_response }}",
    )
    return g
