"""The example graphs written with the Python builder (``spindle.graphs``).

Each module here builds the same graph as the YAML file of the same name in
``spindle/worker/examples/`` (tests/unit/test_graph_builder.py keeps them equal), so
either form can be read next to the other (docs/graphs/builder.md).
"""

from __future__ import annotations

from collections.abc import Callable

from spindle.examples import (
    a2a_tck,
    approval_flow,
    chat,
    clarify,
    delegation,
    pipeline,
    research_agent,
    review_triage,
)
from spindle.graphs import Graph

BUILDERS: dict[str, Callable[[], Graph]] = {
    "a2a-tck": a2a_tck.graph,
    "approval-flow": approval_flow.graph,
    "chat": chat.graph,
    "clarify": clarify.graph,
    "delegation": delegation.graph,
    "pipeline": pipeline.graph,
    "research-agent": research_agent.graph,
    "review-triage": review_triage.graph,
}
"""Each example graph's builder, by graph name."""

__all__ = ["BUILDERS"]
