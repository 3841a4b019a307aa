"""The node-type registry: what ``execute_node`` can run.

A node type is a spec (``spindle.shared.graphs.node_types.NodeTypeSpec``) and an
async function ``run(ctx: NodeContext) -> NodeResult | Any``. Plug-ins register
both at once with the ``@node_type`` decorator (re-exported by ``spindle.nodes``),
or through an installed package's ``spindle.node_types`` entry point (naming a
module, or an object, whose import registers its types)::

    @node_type("shout", params=ShoutParams, templates=("text",), timeout_seconds=10)
    async def shout(ctx: NodeContext) -> NodeResult:
        return NodeResult(data=ctx.params.text.upper())

Built-in ``execute_node`` types register their shared spec with ``@implements``;
``agent``, ``prompt`` and ``workstream`` are driven by the workflow itself and have
no implementation here, but appear in the published catalog all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity

from spindle.shared.contracts.envelope import ExecutionPayload, NodeMessage, StateUpdate
from spindle.shared.contracts.errors import ExecutorNotFound
from spindle.shared.contracts.graph_spec import SHARED_STATE_KEY, NodeSpec
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.graphs.expressions import DEFAULT_NODE_STEPS, EvaluationBudget
from spindle.shared.graphs.node_types import (
    BUILTIN_NODE_TYPES,
    NodeTypeSpec,
    RetryDefaults,
    StateReads,
)

if TYPE_CHECKING:
    from spindle.worker.contracts import RunRef
    from spindle.worker.posting.poster import MessagePoster

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "spindle.node_types"


class ClosingPost(BaseModel):
    """A node's last message, posted for it once it has returned.

    Posting it also checks that this attempt is still the activity's latest (a
    retried attempt refuses an older one's results), so a node that ends with a
    message pays one Redis round trip for both instead of two
    (docs/graphs/node-types.md#adding-a-node-type).
    """

    type: AgentMessageType
    text: str | None = None
    details: dict[str, Any] | None = None


class NodeResult(BaseModel):
    """What a node returns (seed 004): its data, chosen ports and metadata.

    ``metadata`` is merged into the run's ``meta`` and so propagates to every
    node that runs after this one; ``closing``, when set, is posted as the node's
    last message after it returns (see ``ClosingPost``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    data: Any = None
    ports: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    closing: ClosingPost | None = None
    state: StateUpdate | None = Field(
        None, description="writes to shared state, under keys the graph declares writable"
    )
    context: StateUpdate | None = Field(None, description="writes to the run's context")


@dataclass
class NodeContext:
    """Everything a node implementation may use.

    Attributes:
        node: the node's spec as written in the graph.
        params: resolved parameters (the type's params model, or a dict when the
            type declares none).
        state: the part of the run state the node reads (read-only by convention):
            ``_previous``, ``meta``, ``context``, and the keys its ``inputs``,
            templates and expressions name (all of it with
            ``reads_state=StateReads.ALL``; see docs/graphs/long-runs.md).
        run: which run this is.
        poster: posts messages to the run's stream, idempotently.
        visit: how many times this node has run in this run, this one included.
        expressions: the node execution's expression budget: pass it to every
            ``evaluate``/``render_template`` the node makes, so that all of them
            together stay within the ``expression_node_steps`` setting
            (docs/graphs/index.md#expression-limits).
        inputs: the NodeMessage envelopes that arrived on the edges into this node
            for this visit, oldest first, payloads filled in (the entry node's is
            the run input, ``from: "input"``); see docs/graphs/envelopes.md.
    """

    node: NodeSpec
    params: Any
    state: dict[str, Any]
    run: RunRef
    poster: MessagePoster
    visit: int = 1
    extras: dict[str, Any] = field(default_factory=dict)
    expressions: EvaluationBudget = field(
        default_factory=lambda: EvaluationBudget(limit=DEFAULT_NODE_STEPS)
    )
    inputs: list[NodeMessage] = field(default_factory=list)

    def input(self, port: str | None = None) -> NodeMessage | None:
        """The envelope that arrived on input ``port`` (an edge's ``to_port``), the
        latest if several did; without ``port``, the latest envelope of any port.
        None: no taken edge brought one this visit."""
        arrived = [m for m in self.inputs if port is None or m.to_port == port]
        return arrived[-1] if arrived else None

    @property
    def shared_state(self) -> dict[str, Any]:
        """The graph's shared state (``state.<key>``; docs/graphs/index.md#shared-state)."""
        shared = self.state.get(SHARED_STATE_KEY)
        return shared if isinstance(shared, dict) else {}

    def execution_payload(self) -> ExecutionPayload:
        """The node's input as seed 001's ``ExecutionPayload``: the latest envelope's
        items (a payload with ``items`` keeps them; another is one item ``"1"``), the
        run's context, ``meta.startTime`` and ``meta.lastNode``."""
        latest = self.input()
        payload = latest.payload if latest is not None else self.previous
        items = payload.get("items") if isinstance(payload, dict) else None
        if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
            items = [{"id": "1", "data": payload}]
        meta = latest.meta if latest is not None else None
        return ExecutionPayload.model_validate(
            {
                "runId": self.run.workflow_id,
                "items": items,
                "context": self.context,
                "meta": {
                    "startTime": (meta.start_time if meta else None) or "",
                    "lastNode": meta.last_node if meta else None,
                },
            }
        )

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

    # Seed 004's node context: who and what this node runs for (docs/graphs/tools.md#tool-context).
    @property
    def tenant_id(self) -> str:
        """The run's tenant."""
        return self.run.tenant_id

    @property
    def user_id(self) -> str | None:
        """The user who started the run (None for a scheduled run)."""
        return self.run.user_id

    @property
    def run_id(self) -> str:
        """The run's id, as the API names it (its workflow id)."""
        return self.run.workflow_id

    @property
    def node_id(self) -> str:
        """This node's id."""
        return self.node.id

    @property
    def context(self) -> dict[str, Any]:
        """The run's ``context`` (read-only by convention)."""
        context = self.state.get("context")
        return context if isinstance(context, dict) else {}

    def heartbeat(self, *details: Any) -> None:
        """Tell Temporal the node is alive (call it in long loops)."""
        if activity.in_activity():
            activity.heartbeat(*details)


NodeImpl = Callable[[NodeContext], Awaitable[Any]]


@dataclass(frozen=True)
class NodeType:
    """A registered node type: its spec and its implementation."""

    spec: NodeTypeSpec
    run: NodeImpl

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def params(self) -> type[BaseModel] | None:
        return self.spec.params

    @property
    def templates(self) -> tuple[str, ...]:
        """The params rendered as templates before validation."""
        return self.spec.templates

    @property
    def description(self) -> str:
        return self.spec.description


_REGISTRY: dict[str, NodeType] = {}


def implements(spec: NodeTypeSpec) -> Callable[[NodeImpl], NodeImpl]:
    """Register an async function as the implementation of ``spec``."""

    def register(fn: NodeImpl) -> NodeImpl:
        if spec.workflow_driven:
            raise ValueError(f"node type {spec.name!r} is run by the workflow, not by a function")
        previous = _REGISTRY.get(spec.name)
        if previous is not None and previous.run is not fn:
            logger.warning("node type %r re-registered by %s", spec.name, fn.__module__)
        _REGISTRY[spec.name] = NodeType(spec=spec, run=fn)
        return fn

    return register


def node_type(
    name: str,
    *,
    params: type[BaseModel] | None = None,
    description: str | None = None,
    templates: Iterable[str] = (),
    expressions: Iterable[str] = (),
    timeout_seconds: float | None = None,
    retry: RetryDefaults | None = None,
    reads_state: StateReads = StateReads.DECLARED,
) -> Callable[[NodeImpl], NodeImpl]:
    """Register an async node implementation under ``name``, with its spec.

    Args:
        name: the node ``type`` graphs use.
        params: pydantic model the resolved params are validated with.
        description: shown in the catalog; default: the first paragraph of the
            function's docstring.
        templates: params whose strings (nested in dicts/lists too) are rendered
            as ``{{ expression }}`` templates over the run state before validation.
        expressions: params that are JMESPath expressions the node evaluates
            itself (the gateway checks that they compile).
        timeout_seconds: default start-to-close timeout of one execution;
            default: 5 minutes (30 seconds for a ``local`` node).
        retry: default retry policy; default: ``RetryDefaults()`` (3 attempts,
            1 s doubling to 30 s).
        reads_state: ``StateReads.DECLARED`` (default): ``ctx.state`` holds the
            keys its ``inputs``/templates/expressions name, plus ``_previous``,
            ``meta`` and ``context``; ``StateReads.ALL``: the whole run state,
            for code that reads ``ctx.state`` freely (costs history per node).
    """

    def register(fn: NodeImpl) -> NodeImpl:
        doc = description if description is not None else (fn.__doc__ or "").strip()
        spec = NodeTypeSpec(
            name=name,
            description=doc.split("\n\n", 1)[0],
            params=params,
            templates=tuple(templates),
            expressions=tuple(expressions),
            timeout_seconds=timeout_seconds,
            retry=retry if retry is not None else RetryDefaults(),
            reads_state=reads_state,
        )
        return implements(spec)(fn)

    return register


def get_node_type(name: str) -> NodeType:
    """The registered node type called ``name``.

    Raises:
        ExecutorNotFound: no such node type on this worker.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ExecutorNotFound(
            f"node type '{name}' is not registered on this worker",
            errors=[{"rule": "unknown_node_type", "type": name}],
        ) from None


def spec_of(name: str) -> NodeTypeSpec | None:
    """The spec of node type ``name``: a built-in, else a type registered in this process.

    Reads what is registered without loading plug-ins, so the workflow may call
    it (the worker loads every type at start-up, before it runs workflows).
    """
    builtin = BUILTIN_NODE_TYPES.get(name)
    if builtin is not None:
        return builtin
    registered = _REGISTRY.get(name)
    return registered.spec if registered is not None else None


def registered_node_types() -> dict[str, NodeType]:
    """The node types registered in this process so far (see ``spindle.worker.offerings``)."""
    return dict(_REGISTRY)
