"""What node types and tools the workers offer, as JSON Schemas.

Workers publish their catalog to the archive at start-up; the gateway validates
graphs against it before starting a run, without importing worker code. Built-in
node types are always known (their parameter models live in ``shared``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from spindle.shared.graphs.node_params import BUILTIN_PARAMS


class NodeTypeInfo(BaseModel):
    name: str
    description: str = ""
    params_schema: dict[str, Any] = Field(default_factory=dict)


class ToolInfo(BaseModel):
    name: str
    description: str = ""
    params_schema: dict[str, Any] = Field(default_factory=dict)


class Catalog(BaseModel):
    """Node types and tools by name. ``tools_known`` is false when no worker has
    published yet, so tool names cannot be checked."""

    node_types: dict[str, NodeTypeInfo] = Field(default_factory=dict)
    tools: dict[str, ToolInfo] = Field(default_factory=dict)
    tools_known: bool = False

    @classmethod
    def builtin(cls) -> Catalog:
        return cls(
            node_types={
                name: NodeTypeInfo(
                    name=name,
                    description=(model.__doc__ or "").strip(),
                    params_schema=model.model_json_schema(),
                )
                for name, model in BUILTIN_PARAMS.items()
            }
        )

    def merged(self, other: Catalog) -> Catalog:
        return Catalog(
            node_types={**self.node_types, **other.node_types},
            tools={**self.tools, **other.tools},
            tools_known=self.tools_known or other.tools_known,
        )
