"""Graphs as data: the spec model and its published JSON Schema.

Parsing and the structural rules live in ``spindle.shared.graphs.structure``;
conditions (``when``) and parameter mappings (``inputs``) are JMESPath expressions
evaluated over the run state (``spindle.shared.graphs.expressions``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

RESERVED_STATE_KEYS = frozenset({"input", "context", "_previous", "meta", "_ports"})
SHARED_STATE_KEY = "state"
"""The run-state key under which the graph's shared state lives (``state.<key>``)."""
STATE_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"
NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"
TASK_QUEUE_PATTERN = r"^[A-Za-z0-9_.:/@\-]{1,200}$"
# Temporal's default number of priority levels (server setting ``matching.priorityLevels``).
PRIORITY_MIN, PRIORITY_MAX = 1, 5


class RetrySpec(BaseModel):
    """Per-node retry policy, overriding the named default for its node type."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(3, ge=1, le=100)
    initial_interval_seconds: float = Field(1.0, gt=0, le=3600)
    backoff_coefficient: float = Field(2.0, ge=1, le=10)
    max_interval_seconds: float = Field(30.0, gt=0, le=86400)
    non_retryable_errors: list[str] = Field(default_factory=list)


class NodeSpec(BaseModel):
    """One node: its id, type, literal ``params`` and JMESPath ``inputs``."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=NODE_ID_PATTERN)
    type: str = Field(min_length=1, max_length=64)
    label: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[str, str] = Field(
        default_factory=dict,
        description="param name → JMESPath over the run state; merged over params",
    )
    retry: RetrySpec | None = None
    timeout_seconds: float | None = Field(None, gt=0, le=86400)
    heartbeat_seconds: float | None = Field(
        None,
        ge=1,
        le=3600,
        description="an attempt of this node silent this long (its worker died or froze) is "
        "retried on another worker; default: 30",
        # Unset, left out: the payload stays what it was before the field existed.
        exclude_if=lambda value: value is None,
    )
    max_visits: int | None = Field(
        None, ge=1, le=10_000, description="bound on executions of this node (cycles)"
    )
    local: bool | None = Field(
        None,
        description="run as a local activity (short pure nodes); default: the type's "
        "(router and output: true, unless the node has a task queue)",
        # Unset, left out: the payload stays what it was before the field was optional.
        exclude_if=lambda value: value is None,
    )
    task_queue: str | None = Field(
        None,
        pattern=TASK_QUEUE_PATTERN,
        description="task queue of this node's activities; default: the graph's "
        "task_queues entry for its type, else the run's own queue",
    )
    priority: int | None = Field(
        None,
        ge=PRIORITY_MIN,
        le=PRIORITY_MAX,
        description="Temporal priority of this node's activities when its queue has a "
        "backlog: 1 runs first, 5 last; default: the run's (3 unless set)",
        # Unset, the field is left out: the payload is what it was before the field
        # existed, which a worker of the previous release (extra="forbid") still
        # reads during a rolling upgrade.
        exclude_if=lambda value: value is None,
    )

    input_schema: dict[str, Any] | None = Field(
        None,
        description="JSON Schema every envelope payload arriving on an edge into this node "
        "must satisfy (for a map: each item); else the node fails naming the field",
        exclude_if=lambda value: value is None,  # as priority: rolling upgrades
    )
    output_schema: dict[str, Any] | None = Field(
        None,
        description="JSON Schema this node's output must satisfy (for a map: each item's "
        "data); else the node fails naming the field",
        exclude_if=lambda value: value is None,
    )
    writes: list[Annotated[str, Field(pattern=STATE_KEY_PATTERN)]] | None = Field(
        None,
        description="the shared-state keys this node writes (each in the graph's "
        "state.writable); unset: any writable key",
        exclude_if=lambda value: value is None,
    )

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value in RESERVED_STATE_KEYS:
            raise ValueError(f"'{value}' is a reserved state key")
        return value


class EdgeSpec(BaseModel):
    """A directed edge, taken when its port matches and its ``when`` holds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    from_port: str | None = None
    to_port: str | None = None
    when: str | None = Field(None, description="JMESPath over the run state; truthy → taken")
    max_iterations: int | None = Field(
        None, ge=1, le=10_000, description="bound on traversals of a loop-back edge"
    )


class SharedStateSpec(BaseModel):
    """The graph's shared state: the keys nodes may write (docs/graphs/index.md#shared-state)."""

    model_config = ConfigDict(extra="forbid")

    writable: list[Annotated[str, Field(pattern=STATE_KEY_PATTERN)]] = Field(
        default_factory=list, max_length=100, description="keys nodes may set, merge or delete"
    )


class GraphSpec(BaseModel):
    """A whole graph: entry node, nodes and edges."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.\-]+$")
    version: str = "1"
    description: str = ""
    entry: str
    nodes: list[NodeSpec] = Field(min_length=1, max_length=1000)
    edges: list[EdgeSpec] = Field(default_factory=list, max_length=5000)
    input_schema: dict[str, Any] | None = Field(
        None, description="JSON Schema the run input must satisfy"
    )
    task_queues: dict[str, Annotated[str, Field(pattern=TASK_QUEUE_PATTERN)]] = Field(
        default_factory=dict,
        description="node type → task queue its activities run on (e.g. {agent: llm}); "
        "a node's own task_queue wins",
        exclude_if=lambda value: not value,  # as NodeSpec.priority: rolling upgrades
    )
    state: SharedStateSpec | None = Field(
        None,
        description="shared state nodes may write, read as state.<key> "
        "(docs/graphs/index.md#shared-state)",
        exclude_if=lambda value: value is None,
    )

    @property
    def writable(self) -> frozenset[str]:
        """The shared-state keys nodes may write."""
        return frozenset(self.state.writable) if self.state is not None else frozenset()

    def node(self, node_id: str) -> NodeSpec:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def task_queue_of(self, node: NodeSpec) -> str | None:
        """The task queue of ``node``'s activities; None: the run's own queue.

        Local activities run on the workflow's worker, so they have none.
        """
        if node.local:
            return None
        return node.task_queue or self.task_queues.get(node.type)

    def outgoing(self, node_id: str) -> list[EdgeSpec]:
        return [e for e in self.edges if e.from_ == node_id]

    def incoming(self, node_id: str) -> list[EdgeSpec]:
        return [e for e in self.edges if e.to == node_id]


def graph_json_schema() -> dict[str, Any]:
    """The published JSON Schema of a graph spec."""
    return GraphSpec.model_json_schema(by_alias=True)
