"""``spindle runs timeline WORKFLOW_ID``: what each node of a run did, in order.

::

    NODE             STATUS   DURATION  INPUT                         OUTPUT
    keywords (tool)  SUCCESS  18 ms     {"text": "Terrible outage…"}  {"keywords": […]}

The rows are the archived node reports of the run's bundle
(``GET /runs/{workflowId}/bundle``), read through the client SDK: the command
needs a gateway and credentials, not MongoDB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

from spindle.cli.client_options import add_client_flags, client_config
from spindle.cli.direct_access import THROUGH_GATEWAY, described

if TYPE_CHECKING:
    from spindle.client import ArchivedNodeReport

# Longest input/output summary in a timeline row.
SUMMARY_CHARS = 60

HEADER = ("NODE", "STATUS", "DURATION", "INPUT", "OUTPUT")


def add_timeline_action(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``timeline`` to ``spindle runs``."""
    timeline = actions.add_parser(
        "timeline",
        help="the run's node executions: status, duration, input and output",
        description=described(
            "Print the run's node executions in order (from its bundle): node, status, "
            "duration, and input and output summaries.",
            THROUGH_GATEWAY,
        ),
    )
    timeline.add_argument("workflow_id", metavar="WORKFLOW_ID")
    timeline.add_argument("--json", action="store_true", help="print the node reports as JSON")
    add_client_flags(timeline)
    timeline.set_defaults(handler=_cmd_timeline)


async def _node_reports(args: argparse.Namespace) -> list[ArchivedNodeReport]:
    from spindle.client import AsyncSpindleClient

    async with AsyncSpindleClient(client_config(args)) as client:
        return (await client.bundle(args.workflow_id)).node_reports


def _cmd_timeline(args: argparse.Namespace) -> int:
    from spindle.shared.contracts.errors import NotFound

    reports = asyncio.run(_node_reports(args))
    if not reports:
        raise NotFound(f"the archive has no node reports of run '{args.workflow_id}'")
    rows = [report.model_dump(mode="json") for report in reports]
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    print(timeline_text(rows))
    return 0


def timeline_text(rows: list[dict[str, Any]]) -> str:
    """Node reports as an aligned table, one row per node execution."""
    table = [HEADER]
    table += [
        (
            _node_label(row),
            str(row.get("status", "")),
            f"{float(row.get('duration_ms') or 0):.0f} ms",
            summarize(row.get("input")),
            _output_summary(row),
        )
        for row in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = []
    for row in table:
        cells = [cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)]
        lines.append("  ".join([*cells, row[4]]).rstrip())
    return "\n".join(lines)


def _node_label(row: dict[str, Any]) -> str:
    label = f"{row.get('node_id')} ({row.get('node_type')})"
    if int(row.get("visit") or 1) > 1:
        label += f" #{row['visit']}"
    return label


def _output_summary(row: dict[str, Any]) -> str:
    if row.get("error"):
        return summarize(f"error: {row['error']}")
    if row.get("output") is not None:
        return summarize(row["output"])
    return summarize(row.get("output_summary"))


def summarize(value: Any, limit: int = SUMMARY_CHARS) -> str:
    """``value`` on one line, as JSON unless it is text, cut to ``limit`` characters.

    A NodeMessage envelope (what node reports archive) is summarised by its payload.
    """
    if isinstance(value, dict) and value.get("type") == "NodeMessage":
        value = value.get("payload")
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
