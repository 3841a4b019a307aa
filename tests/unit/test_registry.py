"""The node-type registry and the published catalog (spindle.worker.registry)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from spindle.nodes import NodeContext, NodeResult, node_type
from spindle.shared.contracts.errors import ExecutorNotFound
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES
from spindle.worker.offerings import build_catalog
from spindle.worker.registry import get_node_type

pytestmark = pytest.mark.unit


class ShoutParams(BaseModel):
    text: str
    times: int = 1


@node_type("test_shout", params=ShoutParams, templates=("text",))
async def shout(ctx: NodeContext) -> NodeResult:
    """Shout a text.

    More words that do not reach the catalog.
    """
    return NodeResult(data=ctx.params.text.upper() * ctx.params.times)


def test_builtins_are_registered_with_their_shared_specs() -> None:
    for name in ("tool", "router", "output"):
        registered = get_node_type(name)
        assert registered.spec is BUILTIN_NODE_TYPES[name]
    assert get_node_type("tool").templates == ("args",)


def test_decorator_registers_a_custom_type() -> None:
    registered = get_node_type("test_shout")
    assert registered.run is shout
    assert registered.description == "Shout a text."
    assert registered.templates == ("text",)


def test_unknown_type_is_executor_not_found() -> None:
    with pytest.raises(ExecutorNotFound, match="'ghost' is not registered"):
        get_node_type("ghost")


def test_catalog_lists_every_node_type_and_tool_with_schemas() -> None:
    catalog = build_catalog()
    assert catalog.tools_known
    assert {"agent", "prompt", "tool", "router", "output", "test_shout"} <= set(catalog.node_types)
    shout_info = catalog.node_types["test_shout"]
    assert shout_info.params_schema["required"] == ["text"]
    calculator = catalog.tools["calculator"]
    assert calculator.params_schema["properties"]["expression"]["type"] == "string"
    assert "arithmetic" in calculator.description
