"""Build a graph in Python: ``Graph``, the small builder of a ``GraphSpec``.

A graph written here is the same document as one written in YAML: ``build()``
returns the ``GraphSpec`` the gateway stores, ``validate()`` checks it locally
with the gateway's own rules (``spindle.shared.graphs.validation``), and
``register()`` sends it through the SDK (``PUT /graphs/{name}``).

Example (the ``pipeline`` example graph; docs/graphs/builder.md)::

    from spindle.graphs import Graph

    g = Graph("pipeline", description="keywords then sentiment")
    keywords = g.tool("keywords", "extract_keywords",
                      inputs={"args": "{text: input.text, limit: `3`}"})
    mood = g.tool("mood", "sentiment", inputs={"args": "{text: input.text}"})
    escalate = g.output("escalation", select="{keywords: keywords}")
    summary = g.output("summary", select="{keywords: keywords}")
    keywords >> mood
    g.edge(mood, escalate, when="mood.label == 'negative'")
    g.edge(mood, summary, when="mood.label != 'negative'")
    spec = g.validate()          # raises GraphInvalid naming every fault
    with SpindleClient.from_env() as client:
        g.register(client)

The entry node is the first node added unless ``entry`` says otherwise. A loop is
an edge back to an earlier node with its bound: ``g.loop(check, draft,
max_iterations=3, when="!check.ok")``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import pairwise
from typing import Any, Protocol

from spindle.client import AsyncSpindleClient, SpindleClient
from spindle.shared.contracts.errors import GraphInvalid
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.graph_errors import GraphError
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import graph_faults, validate_graph

__all__ = ["Graph", "NodeRef"]


class _Edges(Protocol):
    def edge(
        self,
        source: NodeRef | str,
        target: NodeRef | str,
        *,
        when: str | None = None,
        from_port: str | None = None,
        to_port: str | None = None,
        max_iterations: int | None = None,
    ) -> NodeRef: ...


class NodeRef:
    """A node of a ``Graph`` being built; ``a >> b`` adds the edge a → b and returns b."""

    def __init__(self, graph: _Edges, node_id: str) -> None:
        self._graph = graph
        self.id = node_id

    def __rshift__(self, other: NodeRef) -> NodeRef:
        return self._graph.edge(self, other)

    def __repr__(self) -> str:
        return f"NodeRef({self.id!r})"


def _id(node: NodeRef | str) -> str:
    return node.id if isinstance(node, NodeRef) else node


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


class Graph:
    """A graph under construction (nodes, edges with conditions, ports and loop bounds).

    Args:
        name: the graph's name (letters, digits, ``_ . -``).
        description: shown in the catalog and the web page (Markdown).
        version: the graph's version string.
        entry: the first node to run (default: the first node added).
        input_schema: the JSON Schema every run's input must satisfy.
        task_queues: node type → task queue (docs/operations/scaling.md).
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        version: str = "1",
        entry: str | None = None,
        input_schema: dict[str, Any] | None = None,
        task_queues: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.description = description
        self.version = version
        self.entry = entry
        self.input_schema = input_schema
        self.task_queues = task_queues
        self._nodes: list[dict[str, Any]] = []
        self._edges: list[dict[str, Any]] = []

    # --- nodes -----------------------------------------------------------------

    def node(
        self,
        node_id: str,
        type: str,
        *,
        params: dict[str, Any] | None = None,
        inputs: dict[str, str] | None = None,
        label: str | None = None,
        **options: Any,
    ) -> NodeRef:
        """Add a node of any type (built-in or plug-in).

        Args:
            node_id: the node's id, unique in the graph.
            type: the node type's name.
            params: the type's params (docs/graphs/node-params.md).
            inputs: param name → JMESPath over the run state, evaluated at run time.
            label: a human name shown in the web page.
            **options: any other ``NodeSpec`` field (``retry``, ``timeout_seconds``,
                ``max_visits``, ``local``, ``task_queue``, ``priority``, ...).

        Raises:
            GraphInvalid: a node with this id was already added.
        """
        if any(node["id"] == node_id for node in self._nodes):
            raise GraphInvalid(
                f"node '{node_id}' is added twice",
                errors=[
                    {
                        "node": node_id,
                        "field": "id",
                        "rule": "duplicate_id",
                        "message": f"node '{node_id}' is added twice",
                    }
                ],
            )
        spec = {"id": node_id, "type": type, "params": params or {}}
        spec.update(_without_none({"inputs": inputs, "label": label, **options}))
        self._nodes.append(spec)
        return NodeRef(self, node_id)

    def agent(
        self,
        node_id: str,
        *,
        instructions: str,
        prompt: str | None = None,
        tools: Iterable[str] = (),
        label: str | None = None,
        inputs: dict[str, str] | None = None,
        **params: Any,
    ) -> NodeRef:
        """Add an ``agent`` node; ``params`` are the other agent params (``max_turns``, ...)."""
        values = {"instructions": instructions, "prompt": prompt, **params}
        if tools:
            values["tools"] = list(tools)
        return self.node(node_id, "agent", params=_without_none(values), inputs=inputs, label=label)

    def tool(
        self,
        node_id: str,
        tool: str,
        *,
        args: dict[str, Any] | None = None,
        label: str | None = None,
        inputs: dict[str, str] | None = None,
        **options: Any,
    ) -> NodeRef:
        """Add a ``tool`` node calling ``tool`` with ``args`` (or args from ``inputs``)."""
        params = _without_none({"tool": tool, "args": args})
        return self.node(node_id, "tool", params=params, inputs=inputs, label=label, **options)

    def prompt(self, node_id: str, *, label: str | None = None, **params: Any) -> NodeRef:
        """Add a ``prompt`` node (a question to a person; ``title``, ``prompt``, ``ui_schema``)."""
        return self.node(node_id, "prompt", params=params, label=label)

    def router(
        self,
        node_id: str,
        routes: Iterable[tuple[str, str]],
        *,
        default: str | None = None,
        label: str | None = None,
    ) -> NodeRef:
        """Add a ``router`` node: ``routes`` are ``(when, port)`` pairs, tried in order."""
        params: dict[str, Any] = {"routes": [{"when": w, "port": p} for w, p in routes]}
        if default is not None:
            params["default"] = default
        return self.node(node_id, "router", params=params, label=label)

    def output(self, node_id: str, *, label: str | None = None, **params: Any) -> NodeRef:
        """Add an ``output`` node (``select``, ``message``): it sets the run's output."""
        return self.node(node_id, "output", params=params, label=label)

    def map(
        self,
        node_id: str,
        over: str,
        node: dict[str, Any],
        *,
        label: str | None = None,
        **params: Any,
    ) -> NodeRef:
        """Add a ``map`` node running the inline ``node`` once per item of ``over``."""
        return self.node(node_id, "map", params={"over": over, "node": node, **params}, label=label)

    # --- edges -----------------------------------------------------------------

    def edge(
        self,
        source: NodeRef | str,
        target: NodeRef | str,
        *,
        when: str | None = None,
        from_port: str | None = None,
        to_port: str | None = None,
        max_iterations: int | None = None,
    ) -> NodeRef:
        """Add the edge ``source`` → ``target``; returns ``target`` so edges chain.

        Args:
            source: the upstream node.
            target: the downstream node.
            when: a JMESPath condition over the run state; the edge is taken when truthy.
            from_port: the upstream port (a router's route port, ``default``, ...).
            to_port: the downstream node's input port.
            max_iterations: the bound of a loop this edge closes.
        """
        edge = {"from": _id(source), "to": _id(target)}
        edge.update(
            _without_none(
                {
                    "from_port": from_port,
                    "to_port": to_port,
                    "when": when,
                    "max_iterations": max_iterations,
                }
            )
        )
        self._edges.append(edge)
        return target if isinstance(target, NodeRef) else NodeRef(self, target)

    def chain(self, *nodes: NodeRef | str) -> None:
        """Add edges joining ``nodes`` in order (a → b → c)."""
        for source, target in pairwise(nodes):
            self.edge(source, target)

    def loop(
        self,
        source: NodeRef | str,
        back_to: NodeRef | str,
        *,
        max_iterations: int,
        when: str | None = None,
    ) -> None:
        """Add an edge back to an earlier node, taken at most ``max_iterations`` times."""
        self.edge(source, back_to, when=when, max_iterations=max_iterations)

    # --- results ---------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        """The graph as a plain document (what YAML would hold)."""
        entry = self.entry or (self._nodes[0]["id"] if self._nodes else "")
        doc: dict[str, Any] = {
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "entry": entry,
            "nodes": [dict(node) for node in self._nodes],
            "edges": [dict(edge) for edge in self._edges],
        }
        doc.update(
            _without_none({"input_schema": self.input_schema, "task_queues": self.task_queues})
        )
        return doc

    def build(self) -> GraphSpec:
        """The ``GraphSpec``, checked against the spec's schema (not the catalog).

        Raises:
            GraphInvalid: the document does not match the graph schema.
        """
        return parse_graph(self.document())

    def faults(self, catalog: Catalog | None = None) -> list[GraphError]:
        """Every fault the gateway would answer for this graph (empty when valid).

        Args:
            catalog: the node types and tools to check against (default: what a
                worker installed here offers: built-ins and entry-point plug-ins).
        """
        return graph_faults(self.build(), catalog or _local_catalog())

    def validate(
        self, catalog: Catalog | None = None, *, max_node_visits: int | None = None
    ) -> GraphSpec:
        """Check the graph with the gateway's rules and return its ``GraphSpec``.

        Args:
            catalog: as for ``faults``.
            max_node_visits: the gateway's ``max_node_visits`` setting, if it has one.

        Raises:
            GraphInvalid: naming every fault (node, field, rule), as a 422 would.
            ExecutorNotFound: a node type is unknown (with every other fault).
        """
        spec = self.build()
        validate_graph(spec, catalog or _local_catalog(), max_node_visits=max_node_visits)
        return spec

    def register(self, client: SpindleClient) -> GraphSpec:
        """Validate locally, then register through the SDK (``PUT /graphs/{name}``)."""
        return client.register_graph(self.validate())

    async def register_async(self, client: AsyncSpindleClient) -> GraphSpec:
        """``register`` for an ``AsyncSpindleClient``."""
        return await client.register_graph(self.validate())


def _local_catalog() -> Catalog:
    """What a worker installed in this environment would publish."""
    from spindle.worker.offerings import build_catalog

    return build_catalog()
