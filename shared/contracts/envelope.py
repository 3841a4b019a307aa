"""The data that travels between nodes: seed 000's NodeMessage envelope, whose
payload may carry seed 001's ``items[]`` for fan-out, and seed 001's
``ExecutionPayload`` (published at ``GET /schemas/execution-payload``).

Shared by the worker (which builds and carries envelopes) and the gateway (which
publishes their JSON Schema); pure models, no I/O (docs/graphs/envelopes.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRACE_STEPS_KEPT = 10
"""Steps of a NodeMessage's ``trace`` it keeps: the last ones of its path, with
``traceCount`` counting them all. An envelope travels in every node's activity
input, so its size may not grow with the run (docs/graphs/envelopes.md#trace)."""

SHARED_STATE_MAX_BYTES = 65_536
"""Default of the ``shared_state_max_bytes`` setting: the most JSON bytes a run's
shared state (and, apart, its context) may hold after nodes' writes."""

RUN_INPUT_SENDER = "input"
"""``from`` of the envelope the entry node receives: the run's input (a reserved
state key, so no node has that id)."""


def _unset(value: Any) -> bool:
    return value is None


class NodeError(BaseModel):
    """Why a node (or one item) failed."""

    message: str
    node_id: str = Field(alias="nodeId")
    stack: str | None = None

    model_config = ConfigDict(populate_by_name=True)


class Item(BaseModel):
    """One unit of data in a fan-out payload (seed 001)."""

    id: str
    data: Any = None
    binary: dict[str, Any] | None = None
    error: NodeError | None = None


class PayloadMeta(BaseModel):
    """``ExecutionPayload.meta``: when the run started and the node that ran last."""

    start_time: str = Field(alias="startTime", description="ISO 8601: the run's start")
    last_node: str | None = Field(
        None, alias="lastNode", description="the most recently executed node id"
    )

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class ExecutionPayload(BaseModel):
    """Seed 001's envelope: the items flowing into a node, the shared context, meta.

    ``NodeContext.execution_payload()`` gives a node its input in this shape.
    """

    run_id: str = Field(alias="runId")
    items: list[Item]
    context: dict[str, Any] = Field(default_factory=dict)
    meta: PayloadMeta

    model_config = ConfigDict(populate_by_name=True)


class TraceStep(BaseModel):
    """A step reference in a NodeMessage's trace: a node that sent it on, and when."""

    node_id: str = Field(alias="nodeId")
    port: str | None = None
    time: str

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class NodeMessageMeta(BaseModel):
    """Metadata: HITL flags, the prompt's uiSchema, status and error, and who sent it.

    ``nodeType`` and ``role`` describe the sender (``role``: ``agent`` for agent and
    workstream nodes, ``user`` for prompts and the run input, ``system`` for the
    rest); ``startTime`` is the run's start, ``lastNode`` the node that finished
    most recently when the message was made.
    """

    step_id: str | None = Field(None, alias="stepId")
    user_input_needed: bool = Field(False, alias="userInputNeeded")
    ui_schema: dict[str, Any] | None = Field(None, alias="uiSchema")
    status: Literal["pending", "done", "error"] = "pending"
    error: str | None = None
    node_type: str | None = Field(None, alias="nodeType", exclude_if=_unset)
    role: Literal["agent", "user", "system"] | None = Field(None, exclude_if=_unset)
    start_time: str | None = Field(None, alias="startTime", exclude_if=_unset)
    last_node: str | None = Field(None, alias="lastNode", exclude_if=_unset)

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class StateUpdate(BaseModel):
    """Writes a node makes to shared state (or to the run's ``context``).

    Applied in this order: ``set`` replaces a key's value, ``merge`` merges a dict
    into the key's dict (one level), ``delete`` removes keys
    (docs/graphs/index.md#shared-state).
    """

    model_config = ConfigDict(extra="forbid")

    set: dict[str, Any] = Field(default_factory=dict)
    merge: dict[str, dict[str, Any]] = Field(default_factory=dict)
    delete: list[str] = Field(default_factory=list)

    def written(self) -> list[str]:
        """Every key written, in order of first mention."""
        return list(dict.fromkeys([*self.set, *self.merge, *self.delete]))

    def empty(self) -> bool:
        return not (self.set or self.merge or self.delete)


class NodeMessage(BaseModel):
    """The canonical node-to-node envelope of seed 000.

    ``timestamp`` is ISO 8601 and ``messageId`` a UUID; inside a workflow both are
    derived from Temporal's clock and the run's ids, so replay is exact.
    ``trace`` keeps the last ``TRACE_STEPS_KEPT`` steps of the message's path;
    ``traceCount`` counts every step. An output envelope carries the node's writes
    to shared state and context under ``stateUpdates`` / ``contextUpdates``.
    """

    message_id: str = Field(alias="messageId")
    from_: str = Field(alias="from")
    to: str | None = None
    from_port: str | None = Field(None, alias="fromPort")
    to_port: str | None = Field(None, alias="toPort")
    type: Literal["NodeMessage"] = "NodeMessage"
    timestamp: str
    payload: Any = None
    context: dict[str, Any] = Field(default_factory=dict)
    trace: list[TraceStep] = Field(default_factory=list)
    trace_count: int | None = Field(None, alias="traceCount", exclude_if=_unset)
    meta: NodeMessageMeta = Field(default_factory=NodeMessageMeta)
    state_updates: StateUpdate | None = Field(None, alias="stateUpdates", exclude_if=_unset)
    context_updates: StateUpdate | None = Field(None, alias="contextUpdates", exclude_if=_unset)

    model_config = ConfigDict(populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        """JSON-able dict with the seed's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)


class CarriedEnvelopes(BaseModel):
    """The envelopes in flight when a run continues as new (payloads stay in the state)."""

    start_time: str = Field(description="ISO 8601: the run's start (generation 1)")
    last_node: str | None = Field(None, description="the node that finished last")
    waiting: dict[str, list[NodeMessage]] = Field(
        default_factory=dict, description="node id → envelopes arrived, node not started"
    )
    taken: dict[str, list[NodeMessage]] = Field(
        default_factory=dict, description="node id → envelopes of a node under way"
    )


def traced(trace: list[TraceStep], count: int, step: TraceStep) -> tuple[list[TraceStep], int]:
    """``trace`` with ``step`` appended, kept to the last ``TRACE_STEPS_KEPT`` steps,
    and the new step count."""
    return [*trace, step][-TRACE_STEPS_KEPT:], count + 1


def execution_payload_json_schema() -> dict[str, Any]:
    """The published JSON Schema of seed 001's ``ExecutionPayload``."""
    schema = ExecutionPayload.model_json_schema(by_alias=True)
    schema["$id"] = "/schemas/execution-payload"
    return schema
