"""``review-triage``: map → filter → map → merge → output (``review-triage.yaml``)."""

from __future__ import annotations

from spindle.graphs import Graph


def graph() -> Graph:
    """The ``review-triage`` example graph."""
    g = Graph(
        "review-triage",
        description="Items (seed 001): a map scores the sentiment of every review (one batch "
        "activity per 200 reviews, one BATCH_PROGRESS per batch), a filter keeps the negative "
        "ones, a second map drafts a reply to each, and a merge joins the replies back onto "
        "the reviews by id, in input order.",
        input_schema={
            "type": "object",
            "properties": {
                "reviews": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "string"}, "text": {"type": "string"}},
                        "required": ["text"],
                    },
                }
            },
            "required": ["reviews"],
        },
    )
    moods = g.map(
        "moods",
        "input.reviews",
        {
            "type": "tool",
            "params": {"tool": "sentiment"},
            "inputs": {"args": "{text: item.text}"},
        },
        concurrency=8,
    )
    unhappy = g.node(
        "unhappy",
        "filter",
        params={"items": "moods.items", "where": "item.data.label == 'negative'"},
    )
    replies = g.map(
        "replies",
        "unhappy.items",
        {
            "type": "tool",
            "params": {
                "tool": "draft_document",
                "args": {
                    "topic": "reply to review {{ item.id }}",
                    "audience": "customer",
                    "points": 1,
                },
            },
        },
    )
    triaged = g.node("triaged", "merge", params={"over": "[moods.items, replies.items]"})
    report = g.output(
        "report",
        select="{reviews: triaged.items, negative: length(unhappy.items), failed: triaged.failed}",
        message="{{ output.negative }} of {{ length(output.reviews) }} reviews need a reply",
    )
    moods >> unhappy
    g.edge(unhappy, replies, from_port="default")
    replies >> triaged >> report
    return g
