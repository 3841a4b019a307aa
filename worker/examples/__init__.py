"""Example graphs shipped with the worker (YAML files beside this module).

- ``research-agent``: an agent with ``search_notes`` and ``calculator`` → output.
- ``approval-flow``: tool drafts → prompt (HITL) → router → two branches → output.
- ``clarify``: prompt (one free-text question) → output; the A2A card's skill that
  parks in input-required until a follow-up message on the same task answers it.
- ``pipeline``: tool → tool → conditional edges → output, with ``inputs`` mappings
  and metadata propagation.
- ``chat``: one interactive agent (knowledge base, calculator, the workstream tools)
  that answers message after message until COMPLETE (docs/conversations.md).
- ``review-triage``: map (sentiment per review) → filter (negative) → map (a reply
  each) → merge (replies joined onto the reviews by id) → output.
"""

from __future__ import annotations

from importlib import resources

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.structure import parse_graph


def example_texts() -> dict[str, str]:
    """The YAML text of each example, by file stem."""
    folder = resources.files(__name__)
    return {
        entry.name.removesuffix(".yaml"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    }


def load_examples() -> list[GraphSpec]:
    """Every example graph, parsed, sorted by name."""
    return sorted((parse_graph(text) for text in example_texts().values()), key=lambda g: g.name)


def examples_with_origin() -> list[tuple[str, GraphSpec]]:
    """Every example graph as an (origin, graph) pair, ready for graph registration."""
    return [(f"example '{spec.name}'", spec) for spec in load_examples()]


def load_example(name: str) -> GraphSpec:
    """One example graph by name.

    Raises:
        KeyError: no example has that name.
    """
    for spec in load_examples():
        if spec.name == name:
            return spec
    raise KeyError(name)
