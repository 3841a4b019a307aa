"""``pipeline``: tool → tool → conditional edges → output (``pipeline.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph

_SELECT = "{{priority: '{priority}', keywords: keywords, mood: mood.label, tools: meta.tools_used, source: meta.source}}"  # noqa: E501


def graph() -> Graph:
    """The ``pipeline`` example graph."""
    g = Graph(
        "pipeline",
        description="A multi-step text pipeline: keywords then sentiment (tools fed through "
        "JMESPath `inputs`), conditional edges pick escalation or a routine summary. Each "
        "tool node adds its name to the propagated metadata (meta.tools_used), which the "
        "output nodes read along with metadata given at run start.",
        input_schema={
            "type": "object",
            "properties": {"text": {"type": "string", "minLength": 1}},
            "required": ["text"],
        },
    )
    keywords = g.tool(
        "keywords", "extract_keywords", inputs={"args": "{text: input.text, limit: `3`}"}
    )
    mood = g.tool("mood", "sentiment", inputs={"args": "{text: input.text}"})
    escalation = g.output(
        "escalation",
        select=_SELECT.format(priority="high"),
        message="Escalate: negative message about {{ join(', ', keywords) }}",
    )
    summary = g.output(
        "summary",
        select=_SELECT.format(priority="normal"),
        message="Routine {{ mood.label }} message about {{ join(', ', keywords) }}",
    )
    keywords >> mood
    g.edge(mood, escalation, when="mood.label == 'negative'")
    g.edge(mood, summary, when="mood.label != 'negative'")
    return g
