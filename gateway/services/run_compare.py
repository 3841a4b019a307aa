"""Comparing two runs for a caller: ``GET /runs/{a}/compare/{b}``.

This service only fetches: each run's description (``run_views.describe_run``: status,
graph, output, lineage), its archived node reports (with their output envelopes),
its usage per node from its stored messages (``run_usage.summarize_usage``, plus the
tool calls the turns asked for and the tool nodes that ran) and, for a fork with
REUSED nodes, the outputs it reused (its Temporal start input). The comparison
itself is ``spindle.shared.graphs.run_compare`` (docs/replay-and-compare.md).
"""

from __future__ import annotations

import asyncio
import logging

import orjson

from spindle.gateway.runs.access import RunAction
from spindle.gateway.services.callers import Caller
from spindle.gateway.services.run_records import start_input
from spindle.gateway.services.run_usage import summarize_usage
from spindle.gateway.services.run_views import RunLookup, authorize, describe_run
from spindle.gateway.streams.history import stored_messages
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.contracts.compare import CompareSide, NodeUsage, RunComparison
from spindle.shared.contracts.errors import Conflict, SpindleError
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.runs import NodeStatus, ReplayedNode
from spindle.shared.graphs.run_compare import compare_runs, relation

log = logging.getLogger(__name__)

#: Node reports of these statuses made one tool call (a ``tool`` node's execution).
_TOOL_NODE_STATUSES = frozenset({NodeStatus.SUCCESS.value, NodeStatus.FAILED.value})


def tool_calls_by_node(messages: list[StoredMessage]) -> dict[str, int]:
    """Tool calls the main workstream's LLM turns asked for, per node (a retried
    turn's message counted once, by its id)."""
    turns: dict[str, tuple[str, int]] = {}
    for stored in messages:
        if b'"tool_calls"' not in stored.raw:
            continue
        message = orjson.loads(stored.raw)
        details = message.get("d")
        if message.get("t") != AgentMessageType.THOUGHT or not isinstance(details, dict):
            continue
        calls, node = details.get("tool_calls"), details.get("node_id")
        if message.get("w") or not isinstance(calls, list) or not isinstance(node, str):
            continue
        turns[str(message.get("i") or f"seq:{stored.seq}")] = (node, len(calls))
    counted: dict[str, int] = {}
    for node, calls in turns.values():
        counted[node] = counted.get(node, 0) + calls
    return counted


async def _replayed(caller: Caller, workflow_id: str) -> dict[str, ReplayedNode]:
    """The outputs a fork reused (its start input); none once Temporal forgot the run."""
    try:
        return (await start_input(caller, workflow_id)).replayed_outputs
    except SpindleError as exc:
        log.info("compare: reused outputs of %s not readable: %s", workflow_id, exc)
        return {}


async def compare_side(caller: Caller, workflow_id: str) -> CompareSide:
    """Everything the compare reads of one run the caller may read.

    Raises:
        NotFound: unknown, or another tenant's run.
    """
    await authorize(caller, workflow_id, RunAction.READ)
    state = caller.state
    detail = await describe_run(caller, RunLookup(workflow_id=workflow_id))
    reports = await state.archive.node_reports(workflow_id)
    messages = await stored_messages(workflow_id, bus=state.bus, archive=state.archive)
    usage = summarize_usage(workflow_id, messages, state.settings.model_prices)
    calls = tool_calls_by_node(messages)
    for report in reports:
        if report.get("node_type") == "tool" and report.get("status") in _TOOL_NODE_STATUSES:
            node = str(report.get("node_id"))
            calls[node] = calls.get(node, 0) + 1
    per_node = {
        node: NodeUsage(
            tokens=usage.nodes[node].tokens if node in usage.nodes else 0,
            cost=usage.nodes[node].cost_usd if node in usage.nodes else 0.0,
            tool_calls=calls.get(node, 0),
        )
        for node in set(usage.nodes) | set(calls)
    }
    reused = any(report.get("status") == NodeStatus.REUSED.value for report in reports)
    duration = None
    if detail.created_at is not None and detail.closed_at is not None:
        duration = (detail.closed_at - detail.created_at).total_seconds() * 1000
    return CompareSide(
        workflow_id=workflow_id,
        graph_name=detail.graph_name,
        status=detail.status,
        output=detail.output,
        reports=reports,
        usage=per_node,
        total_usage=NodeUsage(
            tokens=usage.total.tokens,
            cost=usage.total.cost_usd,
            tool_calls=sum(calls.values()),
        ),
        replayed=await _replayed(caller, workflow_id) if reused else {},
        duration_ms=duration,
        forked_from=detail.forked_from,
    )


async def compare(caller: Caller, a: str, b: str) -> RunComparison:
    """Compare runs ``a`` and ``b`` (both readable by the caller, and related).

    Raises:
        NotFound: either run is unknown or another tenant's.
        Conflict: the runs are of unrelated graphs (naming both).
    """
    side_a, side_b = await asyncio.gather(compare_side(caller, a), compare_side(caller, b))
    related = relation(side_a, side_b)
    if related is None:
        raise Conflict(
            f"runs '{a}' (graph '{side_a.graph_name}') and '{b}' (graph "
            f"'{side_b.graph_name}') are not related: compare runs of the same graph, "
            "or a fork with its source"
        )
    return compare_runs(
        side_a,
        side_b,
        related=related,
        max_diff_entries=caller.state.settings.compare_max_diff_entries,
    )
