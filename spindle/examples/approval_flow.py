"""``approval-flow``: draft → human review → router → two branches (``approval-flow.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``approval-flow`` example graph."""
    g = Graph(
        "approval-flow",
        description="A tool drafts a document, a person approves or rejects it (human in the "
        "loop, the run pauses until a valid answer arrives), a router follows the decision "
        "into one of two branches, and the output node reports what happened.",
        input_schema={
            "type": "object",
            "properties": {
                "topic": {"type": "string", "minLength": 1},
                "audience": {"type": "string"},
            },
            "required": ["topic"],
        },
    )
    draft = g.tool(
        "draft",
        "draft_document",
        label="Draft the document",
        args={
            "topic": "{{ input.topic }}",
            "audience": "{{ input.audience || 'team' }}",
            "points": 2,
        },
    )
    review = g.prompt(
        "review",
        label="Human review",
        title="Review the draft",
        prompt="Approve or reject the draft, with an optional comment.",
        ui_schema={
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "enum": ["approve", "reject"],
                    "title": "Decision",
                },
                "comment": {"type": "string", "maxLength": 2000, "title": "Comment"},
            },
            "required": ["decision"],
        },
    )
    route = g.router("route", [("review.decision == 'approve'", "approved")], default="rejected")
    publish = g.tool(
        "publish",
        "word_count",
        label="Measure the approved draft",
        inputs={"args": "{text: draft.body}"},
    )
    revise = g.tool(
        "revise",
        "extract_keywords",
        label="Keywords to revise",
        inputs={"args": "{text: review.comment || draft.body, limit: `3`}"},
    )
    result = g.output(
        "result",
        select="{decision: review.decision, comment: review.comment, title: draft.title, "
        "stats: publish, keywords: revise}",
        message="Draft {{ draft.title }}: {{ review.decision }}",
    )
    g.chain(draft, review, route)
    g.edge(route, publish, from_port="approved")
    g.edge(route, revise, from_port="rejected")
    publish >> result
    revise >> result
    return g
