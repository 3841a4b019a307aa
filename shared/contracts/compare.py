"""Comparing two runs: ``GET /runs/{a}/compare/{b}`` (docs/replay-and-compare.md).

``CompareSide`` is what a side is compared from (its archived node reports, its
output, its usage per node), so the core (``spindle.shared.graphs.run_compare``)
is pure and the evaluations workflow's activity compares with it too;
``RunComparison`` is the answer.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from spindle.shared.contracts.forks import ReplaySource
from spindle.shared.contracts.runs import ReplayedNode

#: Default of the ``compare_max_diff_entries`` setting.
DEFAULT_MAX_DIFF_ENTRIES = 200


class NodeUsage(BaseModel):
    """One node's spend over all of its visits (LLM turns, tool calls)."""

    tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0


class CompareSide(BaseModel):
    """One run, as the compare reads it."""

    workflow_id: str
    graph_name: str | None = None
    status: str | None = None
    output: Any = None
    reports: list[dict[str, Any]] = Field(
        default_factory=list, description="the archive's node reports (with output envelopes)"
    )
    usage: dict[str, NodeUsage] = Field(default_factory=dict, description="node id → spend")
    total_usage: NodeUsage | None = Field(
        None, description="the whole run's spend (workstreams included); default: the nodes' sum"
    )
    replayed: dict[str, ReplayedNode] = Field(
        default_factory=dict, description="a fork's reused outputs (REUSED reports have none)"
    )
    duration_ms: float | None = Field(
        None, description="the run's wall-clock time; default: its node executions' sum"
    )
    forked_from: ReplaySource | None = None


class NodeFigures(BaseModel):
    """What one side's node did: its latest visit, and its spend over all visits."""

    status: str
    output: Any = None
    duration_ms: float = 0.0
    tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0
    visits: int = 1


class NodeComparison(BaseModel):
    """A node both runs executed."""

    node_id: str
    a: NodeFigures
    b: NodeFigures
    same_output: bool


class NodeOnlyIn(BaseModel):
    """A node one run executed and the other did not (skipped, absent from its graph)."""

    node_id: str
    figures: NodeFigures


class DiffEntry(BaseModel):
    """One difference between two JSON values.

    ``path`` is ``$`` then ``.key`` per object member (``["key"]`` when the key is not
    a plain identifier) and ``[i]`` per list item.
    """

    path: str
    op: Literal["added", "removed", "changed"]
    a: Any = None
    b: Any = None


class OutputComparison(BaseModel):
    """The runs' final outputs."""

    a: Any = None
    b: Any = None
    same: bool
    diff: list[DiffEntry] = Field(default_factory=list)
    diff_truncated: bool = Field(
        False, description="more differences than compare_max_diff_entries"
    )


class Totals(BaseModel):
    """A run's spend and time."""

    tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0
    duration_ms: float = 0.0
    nodes: int = Field(0, description="nodes executed (not skipped)")


class SideInfo(BaseModel):
    """Which run a side is."""

    workflow_id: str
    graph_name: str | None = None
    status: str | None = None


class RunComparison(BaseModel):
    """``GET /runs/{a}/compare/{b}``."""

    a: SideInfo
    b: SideInfo
    relation: str = Field(description="why the runs compare: same graph, or a fork's lineage")
    nodes: list[NodeComparison] = Field(
        default_factory=list, description="nodes both executed, in a's order"
    )
    only_a: list[NodeOnlyIn] = Field(default_factory=list)
    only_b: list[NodeOnlyIn] = Field(default_factory=list)
    changed_nodes: list[str] = Field(
        default_factory=list, description="nodes both executed whose outputs differ"
    )
    output: OutputComparison
    totals: dict[str, Totals] = Field(description="a, b, and delta (b minus a)")
