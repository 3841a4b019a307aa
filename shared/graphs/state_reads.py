"""Which run-state keys a node may read: the projection its activity receives.

A node's activity never gets the whole run state (docs/design.md §4, §10): the
state holds every node's output, so handing it all to every node makes history
grow with the run's length. This module works out, from the node's ``inputs`` and
the params its ``NodeTypeSpec`` names as templates or expressions, the top-level
state keys those expressions can touch, by walking the JMESPath syntax tree.

The answer is conservative (a superset): an expression that may read the whole
state (a bare ``@`` or ``*`` at the root, an expression that does not parse) makes
the node read everything. Pure module (no I/O): the workflow sandbox passes it
through.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spindle.shared.contracts.graph_spec import NodeSpec
from spindle.shared.graphs.expressions import (
    ExpressionError,
    compile_expression,
    template_expressions,
)
from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES, NodeTypeSpec, StateReads

ALWAYS_READ = frozenset({"_previous", "meta", "context", "state"})
"""Keys every node gets: the last output, the propagated metadata (bounded), the
shared context and the graph's shared state (both bounded by the
``shared_state_max_bytes`` setting, so their size does not grow with the run)."""

# Nodes whose children are all evaluated against the same context as the node.
_SAME_CONTEXT = frozenset(
    {
        "or_expression",
        "and_expression",
        "not_expression",
        "comparator",
        "function_expression",
        "multi_select_list",
        "multi_select_dict",
        "key_val_pair",
    }
)
# Nodes whose first child is evaluated in the current context and whose other
# children only see what it produced (a derived context).
_LEFT_THEN_DERIVED = frozenset(
    {"subexpression", "index_expression", "projection", "value_projection", "filter_projection"}
)
_NO_READS = frozenset({"literal", "index", "slice", "expref"})


def _root_reads(node: Mapping[str, Any]) -> frozenset[str] | None:
    """Root keys an AST node evaluated against the state reads; None: all of it."""
    kind = node.get("type")
    children: list[Mapping[str, Any]] = node.get("children") or []
    if kind == "field":
        return frozenset({str(node["value"])})
    if kind in ("current", "identity"):
        return None
    if kind in _NO_READS:
        # An expref (``&field``) is evaluated later, per element of a derived list.
        return frozenset()
    if kind in _LEFT_THEN_DERIVED or kind == "pipe":
        left = children[0]
        if left.get("type") == "current" and kind in ("subexpression", "pipe"):
            # ``@.x`` and ``@ | x`` read x of the state itself.
            return _root_reads(children[1])
        return _root_reads(left)
    if kind == "flatten":
        return _root_reads(children[0])
    if kind in _SAME_CONTEXT:
        found: set[str] = set()
        for child in children:
            reads = _root_reads(child)
            if reads is None:
                return None
            found |= reads
        return frozenset(found)
    return None  # an AST node this module does not know: assume the worst


def expression_reads(expression: str) -> frozenset[str] | None:
    """The top-level state keys a JMESPath expression may read.

    Returns:
        The keys, or None when it may read the whole state (or does not parse:
        the node then fails with the parse error, given the whole state).
    """
    try:
        parsed = compile_expression(expression)
    except ExpressionError:
        return None
    return _root_reads(parsed.parsed)


def template_reads(text: str) -> frozenset[str] | None:
    """The keys the ``{{ expression }}`` parts of a template may read (None: all)."""
    try:
        expressions = template_expressions(text)
    except ExpressionError:
        return None
    found: set[str] = set()
    for expression in expressions:
        reads = expression_reads(expression)
        if reads is None:
            return None
        found |= reads
    return frozenset(found)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


def _item_expressions(params: Mapping[str, Any], path: str) -> Iterator[str]:
    """Strings at ``list_param.field`` (e.g. ``routes.when``) of the params."""
    name, _, field = path.partition(".")
    items = params.get(name)
    if isinstance(items, list):
        for item in items:
            if isinstance(item, dict) and isinstance(item.get(field), str):
                yield item[field]


def _expressions_of(node: NodeSpec, spec: NodeTypeSpec) -> Iterator[tuple[str, bool]]:
    """(text, is_template) for every expression the node may evaluate over the state."""
    for expression in node.inputs.values():
        yield expression, False
    for name in spec.checked_templates:
        for text in _strings(node.params.get(name)):
            yield text, True
    for name in spec.expressions:
        for text in _strings(node.params.get(name)):
            yield text, False
    for path in spec.item_expressions:
        for text in _item_expressions(node.params, path):
            yield text, False
    if spec.inline_node is not None:
        inline = node.params.get(spec.inline_node)
        if isinstance(inline, dict):
            yield from _inline_expressions(inline)


def _inline_expressions(inline: Mapping[str, Any]) -> Iterator[tuple[str, bool]]:
    """What a node run per item (a map's ``params.node``) may read of the state.

    The batch activity resolves it over the map's projection, so its reads count as
    the map's. Every string of its params is taken as a template (a plain string
    reads nothing); a type without a built-in spec may read anything.
    """
    spec = BUILTIN_NODE_TYPES.get(str(inline.get("type")))
    if spec is None:
        yield "@", False
        return
    inputs = inline.get("inputs")
    if isinstance(inputs, dict):
        for expression in inputs.values():
            if isinstance(expression, str):
                yield expression, False
    params = inline.get("params")
    if not isinstance(params, dict):
        return
    yield from ((text, True) for text in _strings(params))
    for name in spec.expressions:
        yield from ((text, False) for text in _strings(params.get(name)))
    for path in spec.item_expressions:
        yield from ((text, False) for text in _item_expressions(params, path))


def node_state_reads(node: NodeSpec, spec: NodeTypeSpec | None) -> frozenset[str] | None:
    """The state keys a node's activity receives; None: the whole state.

    ``_previous``, ``meta`` and ``context`` always; ``input`` when an expression
    reads it (or, see ``project_state``, while no node has finished yet).

    Args:
        node: the node as written in the graph.
        spec: its type's spec; None (an unknown type) or ``StateReads.ALL``
            means the whole state.
    """
    if spec is None or spec.reads_state is StateReads.ALL:
        return None
    found: set[str] = set(ALWAYS_READ)
    for text, is_template in _expressions_of(node, spec):
        reads = template_reads(text) if is_template else expression_reads(text)
        if reads is None:
            return None
        found |= reads
    return frozenset(found)


def project_state(state: Mapping[str, Any], reads: frozenset[str] | None) -> dict[str, Any]:
    """The part of ``state`` a node reads (a new dict; values are shared, not copied).

    ``input`` is added while ``_previous`` is unset: a node's default input (its
    "previous output") is then the run's input.
    """
    if reads is None:
        return dict(state)
    keys = reads if "_previous" in state else reads | {"input"}
    # The state's own order, not the set's (string hashes vary between processes).
    return {key: value for key, value in state.items() if key in keys}
