"""What node types and tools the workers offer, as JSON Schemas.

Workers publish their catalog to the archive at start-up; the gateway validates
graphs against it before starting a run, without importing worker code. Built-in
node types are always known (their specs live in ``spindle.shared.graphs.node_types``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES, NodeTypeSpec


class NodeTypeInfo(BaseModel):
    """A node type as published: what the gateway needs to validate its nodes.

    Catalogs archived before ``templates``, ``expressions``, ``runs`` and
    ``timeout_seconds`` existed parse with their defaults.
    """

    name: str
    description: str = ""
    params_schema: dict[str, Any] = Field(default_factory=dict)
    templates: list[str] = Field(
        default_factory=list,
        description="params rendered as {{ expression }} templates at run time",
    )
    expressions: list[str] = Field(
        default_factory=list, description="params that are JMESPath expressions"
    )
    runs: str = Field("activity", description="how the workflow runs it (RunKind)")
    timeout_seconds: float | None = Field(
        None, description="default start-to-close timeout of one of its activities"
    )

    @classmethod
    def of(cls, spec: NodeTypeSpec) -> NodeTypeInfo:
        """The published form of ``spec``."""
        return cls(
            name=spec.name,
            description=spec.description,
            params_schema=spec.params_schema(),
            templates=list(spec.checked_templates),
            expressions=list(spec.expressions),
            runs=spec.runs.value,
            timeout_seconds=spec.timeout_seconds,
        )


class ToolInfo(BaseModel):
    """A tool as published: its name, what it does and the JSON Schema of its arguments."""

    name: str
    description: str = ""
    params_schema: dict[str, Any] = Field(default_factory=dict)
    source: str = Field(
        "unknown",
        description="builtin (ships with Spindle), plugin (entry point spindle.tools), "
        "mcp (an MCP server of a graph); unknown in a catalog published before it was said",
    )


class Catalog(BaseModel):
    """Node types and tools by name. ``tools_known`` is false when no worker has
    published yet, so tool names cannot be checked."""

    node_types: dict[str, NodeTypeInfo] = Field(default_factory=dict)
    tools: dict[str, ToolInfo] = Field(default_factory=dict)
    tools_known: bool = False

    @classmethod
    def builtin(cls) -> Catalog:
        """The built-in node types (``BUILTIN_NODE_TYPES``); no tools."""
        return cls(
            node_types={name: NodeTypeInfo.of(spec) for name, spec in BUILTIN_NODE_TYPES.items()}
        )

    def merged(self, other: Catalog) -> Catalog:
        return Catalog(
            node_types={**self.node_types, **other.node_types},
            tools={**self.tools, **other.tools},
            tools_known=self.tools_known or other.tools_known,
        )
