"""The data that travels between nodes: seed 000's NodeMessage envelope (its models
live in ``spindle.shared.contracts.envelope``, which the gateway publishes too) and
how one rides in an activity's input.

An envelope on an edge carries no payload in history: the payload is the sending
node's output, already in the run state, so ``InboundEnvelope.payload_key`` names
the state key that holds it (``_previous`` when the sender finished last) and the
node's state projection includes that key. History per node stays constant
(docs/graphs/envelopes.md).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from spindle.shared.contracts.envelope import (
    RUN_INPUT_SENDER,
    TRACE_STEPS_KEPT,
    ExecutionPayload,
    Item,
    NodeError,
    NodeMessage,
    NodeMessageMeta,
    PayloadMeta,
    StateUpdate,
    TraceStep,
    traced,
)
from spindle.shared.graphs.node_types import RunKind

__all__ = [
    "RUN_INPUT_SENDER",
    "TRACE_STEPS_KEPT",
    "ExecutionPayload",
    "InboundEnvelope",
    "Item",
    "NodeError",
    "NodeMessage",
    "NodeMessageMeta",
    "PayloadMeta",
    "StateUpdate",
    "TraceStep",
    "role_of",
    "traced",
]

_ROLES = {
    RunKind.AGENT_LOOP: "agent",
    RunKind.WORKSTREAM: "agent",
    RunKind.HUMAN_INPUT: "user",
}


def role_of(runs: RunKind | None) -> str:
    """A sender's ``meta.role`` by how its type runs: ``agent`` (agent and workstream
    nodes), ``user`` (prompts), else ``system``."""
    return _ROLES.get(runs, "system") if runs is not None else "system"


class InboundEnvelope(BaseModel):
    """An envelope that arrived on an edge into a node, without its payload."""

    message: NodeMessage
    payload_key: str = Field(description="the state key holding the payload")

    def resolved(self, state: dict[str, Any]) -> NodeMessage:
        """The envelope with its payload and the run's context filled in from ``state``."""
        context = state.get("context")
        return self.message.model_copy(
            update={
                "payload": state.get(self.payload_key),
                "context": context if isinstance(context, dict) else {},
            }
        )
