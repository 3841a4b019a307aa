"""``filter`` and ``merge`` nodes: items (seed 001) split by a condition and joined by id.

Both run as the ``execute_node`` activity over item lists in the run state. A
large list travels as one payload the codec offloads to MongoDB (history keeps a
reference), and both are a single pass over it, so a batched plan like ``map``'s
would cost more activities than it saves (docs/graphs/node-types.md).

Every evaluation of one execution (``items``/``over``, each item's ``where``)
spends the execution's one expression budget (``NodeContext.expressions``), in a
thread off the event loop (docs/graphs/index.md#expression-limits).
"""

from __future__ import annotations

from typing import Any

from spindle.shared.graphs.expressions import (
    ExpressionBudgetSpent,
    ExpressionError,
    evaluate,
    is_truthy,
)
from spindle.shared.graphs.node_params import FilterParams, MergeParams
from spindle.shared.graphs.node_types import FILTER, MERGE
from spindle.worker.contracts.param_resolution import budget_spent, invalid_params, off_loop
from spindle.worker.registry import NodeContext, NodeResult, implements

REJECTED_PORT = "rejected"
DEFAULT_PORT = "default"

Item = dict[str, Any]


def _list_at(ctx: NodeContext, param: str, expression: str) -> list[Any]:
    try:
        value = evaluate(expression, ctx.state, budget=ctx.expressions)
    except ExpressionBudgetSpent as exc:
        raise budget_spent(ctx.node.id, exc) from exc
    except ExpressionError as exc:
        raise _bad(ctx, param, str(exc)) from exc
    if value is None:
        return []  # a branch that did not run: no items
    if not isinstance(value, list):
        raise _bad(ctx, param, f"{expression!r} yielded a {type(value).__name__}, not a list")
    return value


def _bad(ctx: NodeContext, param: str, why: str) -> Exception:
    return invalid_params(
        f"node '{ctx.node.id}': params.{param}: {why}",
        [{"node": ctx.node.id, "field": f"params.{param}", "rule": "items"}],
    )


@implements(FILTER)
async def run_filter(ctx: NodeContext) -> NodeResult:
    """Keep the items whose ``where`` holds (port ``default``), the rest go to ``rejected``."""
    kept, rejected = await off_loop(_split, ctx)
    return NodeResult(
        data={"items": kept, "rejected": rejected},
        # Both ports always fire, an empty list included: a merge downstream waits
        # for both branches and must not see one skipped for want of items.
        ports=[DEFAULT_PORT, REJECTED_PORT],
    )


def _split(ctx: NodeContext) -> tuple[list[Any], list[Any]]:
    """(kept, rejected): every item's ``where`` against the execution's one budget."""
    params: FilterParams = ctx.params
    kept: list[Any] = []
    rejected: list[Any] = []
    for index, item in enumerate(_list_at(ctx, "items", params.items)):
        scope = {**ctx.state, "item": item, "item_index": index}
        try:
            keep = is_truthy(evaluate(params.where, scope, budget=ctx.expressions))
        except ExpressionBudgetSpent as exc:
            raise budget_spent(ctx.node.id, exc) from exc
        except ExpressionError as exc:
            raise _bad(ctx, "where", f"item {index}: {exc}") from exc
        (kept if keep else rejected).append(item)
    return kept, rejected


def _joined(first: Item, second: Item) -> Item:
    """One item from two with the same id: data merged (objects) or the later one's;
    an error in either stays."""
    out = dict(first)
    if "data" in second:
        ours, theirs = first.get("data"), second.get("data")
        both_objects = isinstance(ours, dict) and isinstance(theirs, dict)
        out["data"] = {**ours, **theirs} if both_objects else theirs  # type: ignore[dict-item]
    if "error" in second and "error" not in first:
        out["error"] = second["error"]
    if isinstance(second.get("binary"), dict):
        out["binary"] = {**(first.get("binary") or {}), **second["binary"]}
    return out


def _in_input_order(items: dict[str, Item]) -> list[Item]:
    """Default ids are input positions ("0", "1", …): sort those numerically, so a list
    split by a filter comes back in its input order; other ids keep first-seen order."""
    ids = list(items)
    if all(i.isdigit() and (i == "0" or not i.startswith("0")) for i in ids):
        ids.sort(key=int)
    return [items[i] for i in ids]


@implements(MERGE)
async def run_merge(ctx: NodeContext) -> NodeResult:
    """Join the items of several branches by id, in input order."""
    params: MergeParams = ctx.params
    merged: dict[str, Item] = {}
    branches = await off_loop(_list_at, ctx, "over", params.over)
    for position, branch in enumerate(branches):
        if branch is None:
            continue
        if not isinstance(branch, list):
            why = f"entry {position} is a {type(branch).__name__}, not a list of items"
            raise _bad(ctx, "over", why)
        for item in branch:
            if not isinstance(item, dict) or "id" not in item:
                raise _bad(ctx, "over", f"entry {position} holds {item!r:.80}, not an item")
            key = str(item["id"])
            merged[key] = _joined(merged[key], item) if key in merged else dict(item)
    items = _in_input_order(merged)
    failed = sum(1 for item in items if "error" in item)
    return NodeResult(data={"items": items, "succeeded": len(items) - failed, "failed": failed})
