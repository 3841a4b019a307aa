"""Graphs as data: the spec model, its JSON Schema, and static validation.

A graph is validated completely before a run starts, so that a broken graph is
refused with an error naming the node and the rule, and no workflow is started.
Conditions (``when``) and parameter mappings (``inputs``) are JMESPath
expressions evaluated over the run state (see ``shared.expressions``).
"""

from __future__ import annotations

from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.errors import GraphInvalid
from shared.expressions import ExpressionError, compile_expression

RESERVED_STATE_KEYS = frozenset({"input", "context", "_previous", "meta", "_ports"})
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
    max_visits: int | None = Field(
        None, ge=1, le=10_000, description="bound on executions of this node (cycles)"
    )
    local: bool = Field(False, description="run as a local activity (short pure nodes)")
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


def parse_graph(data: dict[str, Any] | str) -> GraphSpec:
    """Parse a graph from a dict or JSON/YAML text, naming what is wrong.

    Raises:
        GraphInvalid: the document does not match the schema.
    """
    if isinstance(data, str):
        try:
            data = yaml.safe_load(data)
        except yaml.YAMLError as exc:
            raise GraphInvalid(f"graph is not valid JSON/YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise GraphInvalid("graph must be an object")
    try:
        return GraphSpec.model_validate(data)
    except ValidationError as exc:
        errors = [_describe_pydantic_error(data, e) for e in exc.errors()]
        raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors) from exc


def _describe_pydantic_error(data: dict[str, Any], err: Any) -> dict[str, Any]:
    loc = list(err["loc"])
    where = ".".join(str(p) for p in loc)
    node_id = None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = data.get("nodes")
        if isinstance(nodes, list) and loc[1] < len(nodes) and isinstance(nodes[loc[1]], dict):
            node_id = nodes[loc[1]].get("id")
    prefix = f"node '{node_id}': " if node_id else ""
    return {
        "node": node_id,
        "field": where,
        "rule": err["type"],
        "message": f"{prefix}{where}: {err['msg']}",
    }


def find_back_edges(spec: GraphSpec) -> set[int]:
    """Indexes of edges that close a cycle (to an ancestor in a DFS from entry).

    The scheduler treats these as loop-backs; every other edge is forward, and the
    forward edges form a DAG.
    """
    index_by_from: dict[str, list[int]] = {}
    for i, edge in enumerate(spec.edges):
        index_by_from.setdefault(edge.from_, []).append(i)
    back: set[int] = set()
    state: dict[str, int] = {}  # 1 = on stack, 2 = done

    # Iterative DFS so deep graphs cannot hit the recursion limit.
    stack: list[tuple[str, int]] = [(spec.entry, 0)]
    state[spec.entry] = 1
    while stack:
        node_id, pos = stack[-1]
        out = index_by_from.get(node_id, [])
        if pos < len(out):
            stack[-1] = (node_id, pos + 1)
            edge_index = out[pos]
            target = spec.edges[edge_index].to
            mark = state.get(target, 0)
            if mark == 1:
                back.add(edge_index)
            elif mark == 0:
                state[target] = 1
                stack.append((target, 0))
        else:
            state[node_id] = 2
            stack.pop()
    return back


def validate_structure(spec: GraphSpec) -> None:
    """Check the rules that need no node-type knowledge.

    Rules: unique node ids, entry exists, every edge end exists, every node is
    reachable from the entry, every cycle is bounded, every expression compiles.

    Raises:
        GraphInvalid: naming each node and rule broken.
    """
    errors: list[dict[str, Any]] = []

    def fail(node: str | None, rule: str, message: str) -> None:
        errors.append({"node": node, "rule": rule, "message": message})

    ids = [n.id for n in spec.nodes]
    seen: set[str] = set()
    for node_id in ids:
        if node_id in seen:
            fail(node_id, "duplicate_node_id", f"node '{node_id}' is defined more than once")
        seen.add(node_id)
    if spec.entry not in seen:
        fail(spec.entry, "missing_entry", f"entry node '{spec.entry}' is not defined")
    for edge in spec.edges:
        for end, role in ((edge.from_, "from"), (edge.to, "to")):
            if end not in seen:
                fail(
                    end,
                    "dangling_edge",
                    f"edge {edge.from_} → {edge.to}: '{role}' node '{end}' is not defined",
                )
        if edge.when is not None:
            try:
                compile_expression(edge.when)
            except ExpressionError as exc:
                fail(edge.from_, "bad_condition", f"edge {edge.from_} → {edge.to}: {exc}")
    for node in spec.nodes:
        for param, expr in node.inputs.items():
            try:
                compile_expression(expr)
            except ExpressionError as exc:
                fail(node.id, "bad_input_mapping", f"node '{node.id}': inputs.{param}: {exc}")
    if errors:
        raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors)

    reachable: set[str] = set()
    frontier = [spec.entry]
    while frontier:
        current = frontier.pop()
        if current in reachable:
            continue
        reachable.add(current)
        frontier.extend(e.to for e in spec.outgoing(current))
    for node_id in ids:
        if node_id not in reachable:
            fail(node_id, "unreachable_node", f"node '{node_id}' is not reachable from the entry")

    for edge_index in sorted(find_back_edges(spec)):
        edge = spec.edges[edge_index]
        target = spec.node(edge.to)
        if edge.max_iterations is None and target.max_visits is None:
            fail(
                edge.to,
                "unbounded_cycle",
                f"edge {edge.from_} → {edge.to} closes a cycle with no bound: "
                f"set max_iterations on the edge or max_visits on node '{edge.to}'",
            )
    if errors:
        raise GraphInvalid("; ".join(e["message"] for e in errors), errors=errors)
