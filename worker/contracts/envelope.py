"""The data that travels between nodes: seed 000's NodeMessage envelope, whose
payload may carry seed 001's ``items[]`` for fan-out."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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


class ExecutionPayload(BaseModel):
    """Seed 001's envelope for item lists: what a ``map`` node fans out over."""

    run_id: str = Field(alias="runId")
    items: list[Item]
    context: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(populate_by_name=True)


class TraceStep(BaseModel):
    """A step reference in a NodeMessage's trace."""

    node_id: str = Field(alias="nodeId")
    port: str | None = None
    time: str

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class NodeMessageMeta(BaseModel):
    """Optional metadata: HITL flags, the prompt's uiSchema, status and error."""

    step_id: str | None = Field(None, alias="stepId")
    user_input_needed: bool = Field(False, alias="userInputNeeded")
    ui_schema: dict[str, Any] | None = Field(None, alias="uiSchema")
    status: Literal["pending", "done", "error"] = "pending"
    error: str | None = None

    model_config = ConfigDict(populate_by_name=True, extra="allow")


class NodeMessage(BaseModel):
    """The canonical node-to-node envelope of seed 000.

    ``timestamp`` is ISO 8601 and ``messageId`` a UUID; inside a workflow both come
    from Temporal (``workflow.now()`` / ``workflow.uuid4()``) so replay is exact.
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
    meta: NodeMessageMeta = Field(default_factory=NodeMessageMeta)

    model_config = ConfigDict(populate_by_name=True)

    def wire(self) -> dict[str, Any]:
        """JSON-able dict with the seed's camelCase names."""
        return self.model_dump(mode="json", by_alias=True)
