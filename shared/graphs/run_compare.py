"""Comparing two runs (pure): per node, nodes only in one side, outputs, totals.

Used by ``GET /runs/{a}/compare/{b}`` (``spindle.gateway.services.run_compare`` only
fetches) and, next, by the evaluations workflow's activity. The rules
(docs/replay-and-compare.md):

* Two runs are *related* when they run the same graph (by name) or one is a fork of
  the other (``forked_from``); other pairs are refused.
* A node is in a side when it executed there (a report that is not SKIPPED); its
  figures are its latest visit's status, output and duration, and its tokens, cost
  and tool calls over all visits. A REUSED node's output is the one the fork reused.
* Outputs are the same when their canonical JSON is; ``json_diff`` lists what differs,
  at most ``max_entries`` entries (the ``compare_max_diff_entries`` setting).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import orjson

from spindle.shared.contracts.compare import (
    DEFAULT_MAX_DIFF_ENTRIES,
    CompareSide,
    DiffEntry,
    NodeComparison,
    NodeFigures,
    NodeOnlyIn,
    NodeUsage,
    OutputComparison,
    RunComparison,
    SideInfo,
    Totals,
)
from spindle.shared.contracts.runs import NodeStatus

Op = Literal["added", "removed"]
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def relation(a: CompareSide, b: CompareSide) -> str | None:
    """Why ``a`` and ``b`` compare (same graph, or one forked from the other); None: unrelated."""
    if a.forked_from is not None and a.forked_from.workflow_id == b.workflow_id:
        return f"{a.workflow_id} is a fork of {b.workflow_id}"
    if b.forked_from is not None and b.forked_from.workflow_id == a.workflow_id:
        return f"{b.workflow_id} is a fork of {a.workflow_id}"
    if a.graph_name is not None and a.graph_name == b.graph_name:
        return f"both run graph '{a.graph_name}'"
    return None


def canonical(value: Any) -> bytes:
    """``value`` as canonical JSON (sorted keys): equal values, equal bytes."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _member(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{orjson.dumps(key).decode()}]"


def json_diff(a: Any, b: Any, *, max_entries: int = DEFAULT_MAX_DIFF_ENTRIES) -> list[DiffEntry]:
    """What differs between two JSON values, depth first, at most ``max_entries + 1``
    entries (one more than asked, so a caller can tell it was cut).

    Objects compare member by member (sorted keys), lists item by item (extra items
    are ``added`` / ``removed``); anything else, or values of different types, is one
    ``changed`` entry.
    """
    found: list[DiffEntry] = []
    # (path, a, b, op): op None compares the two; "added"/"removed" is an entry already.
    stack: list[tuple[str, Any, Any, Op | None]] = [("$", a, b, None)]
    while stack and len(found) <= max_entries:
        path, left, right, op = stack.pop()
        if op is not None:
            found.append(DiffEntry(path=path, op=op, a=left, b=right))
        elif isinstance(left, dict) and isinstance(right, dict):
            for key in sorted(set(left) | set(right), key=str, reverse=True):
                where = _member(path, str(key))
                if key not in right:
                    stack.append((where, left[key], None, "removed"))
                elif key not in left:
                    stack.append((where, None, right[key], "added"))
                else:
                    stack.append((where, left[key], right[key], None))
        elif isinstance(left, list) and isinstance(right, list):
            for index in reversed(range(max(len(left), len(right)))):
                where = f"{path}[{index}]"
                if index >= len(right):
                    stack.append((where, left[index], None, "removed"))
                elif index >= len(left):
                    stack.append((where, None, right[index], "added"))
                else:
                    stack.append((where, left[index], right[index], None))
        elif canonical(left) != canonical(right):
            found.append(DiffEntry(path=path, op="changed", a=left, b=right))
    return found


def _latest_reports(side: CompareSide) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """Executed nodes in first-execution order, and each one's latest report."""
    order: list[str] = []
    latest: dict[str, dict[str, Any]] = {}
    for report in side.reports:
        if report.get("status") == NodeStatus.SKIPPED.value:
            continue
        node_id = str(report.get("node_id"))
        if node_id not in latest:
            order.append(node_id)
        elif int(report.get("visit") or 1) < int(latest[node_id].get("visit") or 1):
            continue
        latest[node_id] = report
    return order, latest


def _figures(side: CompareSide, node_id: str, report: dict[str, Any]) -> NodeFigures:
    status = str(report.get("status"))
    if status == NodeStatus.REUSED.value:
        reused = side.replayed.get(node_id)
        output = reused.output if reused is not None else None
    else:
        envelope = report.get("output")
        output = envelope.get("payload") if isinstance(envelope, dict) else None
    usage = side.usage.get(node_id, NodeUsage())
    return NodeFigures(
        status=status,
        output=output,
        duration_ms=float(report.get("duration_ms") or 0.0),
        tokens=usage.tokens,
        cost=usage.cost,
        tool_calls=usage.tool_calls,
        visits=int(report.get("visit") or 1),
    )


def _totals(side: CompareSide, figures: dict[str, NodeFigures]) -> Totals:
    spent = side.total_usage or NodeUsage(
        tokens=sum(f.tokens for f in figures.values()),
        cost=round(sum(f.cost for f in figures.values()), 9),
        tool_calls=sum(f.tool_calls for f in figures.values()),
    )
    duration = side.duration_ms
    if duration is None:
        duration = sum(float(r.get("duration_ms") or 0.0) for r in side.reports)
    return Totals(
        tokens=spent.tokens,
        cost=spent.cost,
        tool_calls=spent.tool_calls,
        duration_ms=round(duration, 3),
        nodes=len(figures),
    )


def _delta(a: Totals, b: Totals) -> Totals:
    return Totals(
        tokens=b.tokens - a.tokens,
        cost=round(b.cost - a.cost, 9),
        tool_calls=b.tool_calls - a.tool_calls,
        duration_ms=round(b.duration_ms - a.duration_ms, 3),
        nodes=b.nodes - a.nodes,
    )


def compare_runs(
    a: CompareSide,
    b: CompareSide,
    *,
    related: str,
    max_diff_entries: int = DEFAULT_MAX_DIFF_ENTRIES,
) -> RunComparison:
    """Compare two runs (see the module docstring); ``related`` is ``relation(a, b)``."""
    order_a, latest_a = _latest_reports(a)
    order_b, latest_b = _latest_reports(b)
    figures_a = {n: _figures(a, n, latest_a[n]) for n in order_a}
    figures_b = {n: _figures(b, n, latest_b[n]) for n in order_b}
    nodes = [
        NodeComparison(
            node_id=node_id,
            a=figures_a[node_id],
            b=figures_b[node_id],
            same_output=canonical(figures_a[node_id].output)
            == canonical(figures_b[node_id].output),
        )
        for node_id in order_a
        if node_id in figures_b
    ]
    diff = json_diff(a.output, b.output, max_entries=max_diff_entries)
    totals_a, totals_b = _totals(a, figures_a), _totals(b, figures_b)
    return RunComparison(
        a=SideInfo(workflow_id=a.workflow_id, graph_name=a.graph_name, status=a.status),
        b=SideInfo(workflow_id=b.workflow_id, graph_name=b.graph_name, status=b.status),
        relation=related,
        nodes=nodes,
        only_a=[NodeOnlyIn(node_id=n, figures=figures_a[n]) for n in order_a if n not in latest_b],
        only_b=[NodeOnlyIn(node_id=n, figures=figures_b[n]) for n in order_b if n not in latest_a],
        changed_nodes=[node.node_id for node in nodes if not node.same_output],
        output=OutputComparison(
            a=a.output,
            b=b.output,
            same=canonical(a.output) == canonical(b.output),
            diff=diff[:max_diff_entries],
            diff_truncated=len(diff) > max_diff_entries,
        ),
        totals={"a": totals_a, "b": totals_b, "delta": _delta(totals_a, totals_b)},
    )
