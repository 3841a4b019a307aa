"""What this worker offers: the built-in node types and tools, the entry-point plug-ins,
and the catalog it publishes from them.

The registries (``spindle.worker.registry``, ``spindle.worker.tools.registry``) only record what
registers itself; this module imports everything that does. It sits above both, so the
built-in modules can use the registries' decorators without an import cycle. The worker
calls ``load_offerings`` once at start-up, before any workflow or activity runs (the
workflow reads plug-in specs from the registry and must not import plug-ins itself).
"""

from __future__ import annotations

from spindle.shared.graphs.catalog import Catalog, NodeTypeInfo, ToolInfo

# Imported for their registrations: each module registers its node types or tools.
from spindle.worker import nodes
from spindle.worker.offerings.entry_points import load_entry_points
from spindle.worker.registry import ENTRY_POINT_GROUP as NODE_TYPES_GROUP
from spindle.worker.registry import NodeType, registered_node_types
from spindle.worker.tools import builtin
from spindle.worker.tools.registry import ENTRY_POINT_GROUP as TOOLS_GROUP
from spindle.worker.tools.registry import ToolDef, registered_tools

__all__ = [
    "build_catalog",
    "builtin",
    "load_node_types",
    "load_offerings",
    "load_tools",
    "nodes",
]

_plugins_loaded = False


def load_offerings() -> None:
    """Import the entry-point plug-ins of node types and tools, once per process.

    A broken plug-in is logged, not fatal (``spindle.worker.offerings.entry_points``).
    """
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        load_entry_points(NODE_TYPES_GROUP)
        load_entry_points(TOOLS_GROUP)


def load_node_types() -> dict[str, NodeType]:
    """Every node type this worker runs: built-ins and plug-ins."""
    load_offerings()
    return registered_node_types()


def load_tools() -> dict[str, ToolDef]:
    """Every tool this worker offers: built-ins and plug-ins."""
    load_offerings()
    return registered_tools()


def build_catalog() -> Catalog:
    """What this worker offers: built-in and registered node types, and tools."""
    types = {name: NodeTypeInfo.of(t.spec) for name, t in load_node_types().items()}
    tools = {
        name: ToolInfo(
            name=name,
            description=t.description,
            params_schema=t.params_schema(),
            source="builtin" if t.fn.__module__ == builtin.__name__ else "plugin",
        )
        for name, t in load_tools().items()
    }
    return Catalog.builtin().merged(Catalog(node_types=types, tools=tools, tools_known=True))
