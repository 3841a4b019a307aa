"""The node-type registry: what ``execute_node`` can run.

A node type is an async function ``run(ctx: NodeContext) -> NodeResult | Any``
registered under a name with the ``@node_type`` decorator, or published by an
installed package under the ``spindle.node_types`` entry-point group (the entry
point names a module, or an object, whose import registers its types)::

    @node_type("shout", params=ShoutParams, templates=("text",))
    async def shout(ctx: NodeContext) -> NodeResult:
        return NodeResult(data=ctx.params.text.upper())

``agent`` and ``prompt`` nodes are driven by the workflow itself (LLM turns, HITL
waits) and are not in this registry; their parameter models live in
``spindle.shared.graphs.node_params`` and they appear in the published catalog all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from spindle.shared.contracts.errors import ExecutorNotFound
from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.catalog import Catalog, NodeTypeInfo, ToolInfo
from spindle.worker.plugins import load_entry_points

if TYPE_CHECKING:
    from spindle.worker.activities.poster import MessagePoster
    from spindle.worker.contracts import RunRef

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "spindle.node_types"
WORKFLOW_DRIVEN_TYPES = frozenset({"agent", "prompt"})


class NodeResult(BaseModel):
    """What a node returns (seed 004): its data, chosen ports and metadata.

    ``metadata`` is merged into the run's ``meta`` and so propagates to every
    node that runs after this one.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    data: Any = None
    ports: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


@dataclass
class NodeContext:
    """Everything a node implementation may use.

    Attributes:
        node: the node's spec as written in the graph.
        params: resolved parameters (the type's params model, or a dict when the
            type declares none).
        state: the run state (read-only by convention): ``input``, ``context``,
            ``meta``, each finished node's output, ``_previous``.
        run: which run this is.
        poster: posts messages to the run's stream, idempotently.
        visit: how many times this node has run in this run, this one included.
    """

    node: NodeSpec
    params: Any
    state: dict[str, Any]
    run: RunRef
    poster: MessagePoster
    visit: int = 1
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def previous(self) -> Any:
        """The output of the node that finished last (else the run input)."""
        if "_previous" in self.state:
            return self.state["_previous"]
        return self.state.get("input")

    @property
    def meta(self) -> dict[str, Any]:
        """Metadata propagated from earlier nodes."""
        meta = self.state.get("meta")
        return meta if isinstance(meta, dict) else {}

    def heartbeat(self, *details: Any) -> None:
        """Tell Temporal the node is alive (call it in long loops)."""
        if activity.in_activity():
            activity.heartbeat(*details)


NodeImpl = Callable[[NodeContext], Awaitable[Any]]


@dataclass(frozen=True)
class NodeType:
    """A registered node type."""

    name: str
    run: NodeImpl
    params: type[BaseModel] | None = None
    description: str = ""
    templates: frozenset[str] = frozenset()

    def params_schema(self) -> dict[str, Any]:
        if self.params is None:
            return {"type": "object"}
        return self.params.model_json_schema()

    def info(self) -> NodeTypeInfo:
        return NodeTypeInfo(
            name=self.name, description=self.description, params_schema=self.params_schema()
        )


_REGISTRY: dict[str, NodeType] = {}
_loaded = False


def node_type(
    name: str,
    *,
    params: type[BaseModel] | None = None,
    description: str | None = None,
    templates: Iterable[str] = (),
) -> Callable[[NodeImpl], NodeImpl]:
    """Register an async node implementation under ``name``.

    Args:
        name: the node ``type`` graphs use.
        params: pydantic model the resolved params are validated with.
        description: shown in the catalog; default: the function's docstring.
        templates: params whose strings (nested in dicts/lists too) are rendered
            as ``{{ expression }}`` templates over the run state before validation.
    """

    def register(fn: NodeImpl) -> NodeImpl:
        doc = description if description is not None else (fn.__doc__ or "").strip()
        previous = _REGISTRY.get(name)
        if previous is not None and previous.run is not fn:
            logger.warning("node type %r re-registered by %s", name, fn.__module__)
        _REGISTRY[name] = NodeType(
            name=name,
            run=fn,
            params=params,
            description=doc.split("\n\n", 1)[0],
            templates=frozenset(templates),
        )
        return fn

    return register


def load_node_types() -> dict[str, NodeType]:
    """Import the built-in node types and entry-point plug-ins, once."""
    global _loaded
    if not _loaded:
        _loaded = True
        import spindle.worker.nodes  # noqa: F401  (registers the built-ins)

        load_entry_points(ENTRY_POINT_GROUP)
    return dict(_REGISTRY)


def get_node_type(name: str) -> NodeType:
    """The registered node type called ``name``.

    Raises:
        ExecutorNotFound: no such node type on this worker.
    """
    types = load_node_types()
    try:
        return types[name]
    except KeyError:
        raise ExecutorNotFound(
            f"node type '{name}' is not registered on this worker",
            errors=[{"rule": "unknown_node_type", "type": name}],
        ) from None


def build_catalog() -> Catalog:
    """What this worker offers: built-in and registered node types, and tools."""
    from spindle.worker.tools import load_tools

    types = {name: t.info() for name, t in load_node_types().items()}
    tools = {
        name: ToolInfo(name=name, description=t.description, params_schema=t.params_schema())
        for name, t in load_tools().items()
    }
    return Catalog.builtin().merged(Catalog(node_types=types, tools=tools, tools_known=True))
