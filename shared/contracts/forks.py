"""Forks of a run: what ``POST /runs/{workflow_id}/fork`` takes and what a fork records.

A fork is a new run that starts from a source run's recorded start (its graph,
input, context, meta), optionally with a candidate graph, node overrides and
edited state, and reuses the recorded outputs of the nodes before ``from_node``
(docs/replay-and-compare.md). ``ForkRequest`` is the one request model: the
gateway's route and (next) the evaluations workflow's activity build forks from
it through ``spindle.shared.graphs.forks``. ``ReplaySource`` travels in the fork's
``GraphRunInput.replay`` and is stored as the run document's ``forked_from``
(its lineage, shown by ``GET /runs/{id}`` and filtered by ``GET /runs?forked_from=``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ReplayMode = Literal["live", "recorded"]
"""``live``: call the tool (or model) again; ``recorded``: answer with the source run's
recorded result when one matches (docs/replay-and-compare.md#recorded-replay)."""
OnMiss = Literal["live", "fail"]
"""What a ``recorded`` call with no recorded match does: call for real, or fail the node."""

#: Nodes a fork may override at once.
MAX_FORK_OVERRIDES = 200


class NodeOverride(BaseModel):
    """What a fork changes in one node of the graph it runs."""

    model_config = ConfigDict(extra="forbid")

    params: dict[str, Any] = Field(
        default_factory=dict,
        description="merged into the node's params (top-level keys replace the node's): "
        "e.g. model, instructions, temperature, tools",
    )


class ForkRequest(BaseModel):
    """``POST /runs/{workflow_id}/fork``: where to fork from and what to change (all optional).

    Without any field the fork replays the whole source run live: same graph, same
    input, nothing reused.
    """

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"from_node": "summary", "state": {"keywords": ["edited"]}},
                {"overrides": {"researcher": {"params": {"instructions": "Be brief."}}}},
            ]
        },
    )

    from_node: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="first node to run; default: the entry (a whole replay, nothing reused)",
    )
    state: dict[str, Any] = Field(
        default_factory=dict,
        description="edits merged into the recorded state: node id → output, or 'context'",
    )
    input: Any = Field(None, description="run input; default: the source run's input")
    graph: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="candidate: a registered graph by name; default: the source run's graph",
    )
    version: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        description="with graph: the registered graph must have this version (else 409)",
    )
    graph_spec: dict[str, Any] | None = Field(
        None, description="candidate: an inline graph spec (JSON Schema at GET /graphs/schema)"
    )
    overrides: dict[str, NodeOverride] = Field(
        default_factory=dict,
        max_length=MAX_FORK_OVERRIDES,
        description="node id → its params changes, applied to the graph the fork runs",
    )
    tools: ReplayMode = Field("live", description="tool calls: live or recorded")
    llm: ReplayMode = Field("live", description="LLM turns: live or recorded")
    on_miss: OnMiss = Field(
        "fail", description="a recorded call with no match: call live, or fail the node"
    )

    @model_validator(mode="after")
    def _one_candidate(self) -> ForkRequest:
        if self.graph is not None and self.graph_spec is not None:
            raise ValueError("give graph or graph_spec, not both")
        if self.version is not None and self.graph is None:
            raise ValueError("version needs graph (the registered graph's name)")
        return self


class ReplaySource(BaseModel):
    """A fork's lineage and replay modes (``GraphRunInput.replay``, the run's ``forked_from``).

    The worker reads ``workflow_id``, ``tools``, ``llm`` and ``on_miss`` to answer
    recorded calls (``CallReplay``, in every activity's ``RunRef``); the rest says
    what the fork changed.
    """

    workflow_id: str = Field(description="the source run")
    from_node: str = Field(description="the first node the fork ran (the entry: a whole replay)")
    overrides: dict[str, NodeOverride] = Field(default_factory=dict)
    graph: str = Field(description="the name of the graph the fork runs")
    graph_version: str | None = Field(None, description="that graph's version")
    graph_changed: bool = Field(
        False, description="the fork runs a candidate graph (or overrides) not the source's"
    )
    tools: ReplayMode = "live"
    llm: ReplayMode = "live"
    on_miss: OnMiss = "fail"
    reused: list[str] = Field(
        default_factory=list, description="nodes whose recorded outputs the fork reuses"
    )


class CallReplay(BaseModel):
    """What a fork's activities answer from its source run's records (the slice of
    ``ReplaySource`` they need; docs/replay-and-compare.md#recorded-replay)."""

    source_workflow_id: str = Field(description="the run whose recorded calls are replayed")
    tools: ReplayMode = "live"
    llm: ReplayMode = "live"
    on_miss: OnMiss = "fail"

    @classmethod
    def of(cls, source: ReplaySource | None) -> CallReplay | None:
        """The replay modes of a run's ``GraphRunInput.replay``; None when nothing is
        recorded (a normal run, or a fork with live tools and LLM)."""
        if source is None or (source.tools == "live" and source.llm == "live"):
            return None
        return cls(
            source_workflow_id=source.workflow_id,
            tools=source.tools,
            llm=source.llm,
            on_miss=source.on_miss,
        )
