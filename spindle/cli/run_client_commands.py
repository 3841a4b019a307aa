"""``spindle runs list|describe|cancel``: runs as a client of a gateway sees them.

::

    spindle runs list [--status S] [--graph G] [--limit N] [--json]
    spindle runs describe WORKFLOW_ID [--json]
    spindle runs cancel WORKFLOW_ID [--reason TEXT] [--terminate]

They talk to the gateway through the client SDK (``--url``/``SPINDLE_URL``,
``--api-key``/``SPINDLE_API_KEY``), as ``timeline`` does; only ``replay`` reads
Temporal directly.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from spindle.cli.client_options import add_client_flags, client_config
from spindle.cli.direct_access import THROUGH_GATEWAY, described
from spindle.cli.run_timeline import summarize

if TYPE_CHECKING:
    from spindle.client import AsyncSpindleClient, RunInfo

R = TypeVar("R")


def add_client_actions(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``list``, ``describe`` and ``cancel`` to ``spindle runs``."""
    listing = actions.add_parser(
        "list",
        help="the runs of your tenant, newest first",
        description=described("The runs of your tenant, newest first.", THROUGH_GATEWAY),
    )
    listing.add_argument("--status", default=None, help="only runs in this status")
    listing.add_argument("--graph", default=None, help="only runs of this graph")
    listing.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    listing.add_argument("--json", action="store_true", help="print the page as JSON")
    add_client_flags(listing)
    listing.set_defaults(handler=_cmd_list)

    describe = actions.add_parser(
        "describe",
        help="a run's status, pending prompt, output and node reports",
        description=described(
            "A run's status, pending prompt, output and node reports.", THROUGH_GATEWAY
        ),
    )
    describe.add_argument("workflow_id", metavar="WORKFLOW_ID")
    describe.add_argument("--json", action="store_true", help="print the description as JSON")
    add_client_flags(describe)
    describe.set_defaults(handler=_cmd_describe)

    cancel = actions.add_parser(
        "cancel",
        help="cancel a run (its stream ends with TERMINATED)",
        description=described(
            "Cancel a run, or terminate it at once; its stream ends with TERMINATED.",
            THROUGH_GATEWAY,
        ),
    )
    cancel.add_argument("workflow_id", metavar="WORKFLOW_ID")
    cancel.add_argument("--reason", default=None, help="why, for the logs")
    cancel.add_argument(
        "--terminate", action="store_true", help="terminate at once instead (no clean-up)"
    )
    add_client_flags(cancel)
    cancel.set_defaults(handler=_cmd_cancel)


def _with_client(args: argparse.Namespace, call: Callable[[AsyncSpindleClient], Awaitable[R]]) -> R:
    from spindle.client import AsyncSpindleClient

    async def run() -> R:
        async with AsyncSpindleClient(client_config(args)) as client:
            return await call(client)

    return asyncio.run(run())


def _print_json(value: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _cmd_list(args: argparse.Namespace) -> int:
    page = _with_client(
        args, lambda c: c.list_runs(status=args.status, graph=args.graph, limit=args.limit)
    )
    if args.json:
        _print_json(page.model_dump(mode="json"))
        return 0
    if not page.runs:
        print("no runs")
        return 0
    rows = [("WORKFLOW_ID", "STATUS", "GRAPH", "CREATED")]
    rows += [
        (
            r.workflow_id,
            r.status,
            r.graph_name or "-",
            _when(r.created_at),
        )
        for r in page.runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]))
    if page.total > len(page.runs):
        print(f"({len(page.runs)} of {page.total}; --limit for more)")
    return 0


def _cmd_describe(args: argparse.Namespace) -> int:
    info = _with_client(args, lambda c: c.get_run(args.workflow_id))
    if args.json:
        _print_json(info.model_dump(mode="json"))
        return 0
    print(describe_text(info))
    return 0


def describe_text(info: RunInfo) -> str:
    """A run's description as aligned ``field  value`` lines and a node table."""
    lines = [
        ("workflow", info.workflow_id),
        ("run", info.run_id or "-"),
        ("graph", info.graph_name or "-"),
        ("status", info.status),
        ("created", _when(info.created_at)),
        ("updated", _when(info.updated_at)),
    ]
    if info.current_nodes:
        lines.append(("current", ", ".join(info.current_nodes)))
    if info.pending_input is not None:
        lines.append(("waiting", f"{info.pending_input.node_id}: {info.pending_input.prompt}"))
    if info.output is not None:
        lines.append(("output", _one_line(info.output, limit=200)))
    if info.error:
        lines.append(("error", info.error))
    if info.temporal_ui_url:
        lines.append(("temporal", info.temporal_ui_url))
    text = [f"{name:<9} {value}" for name, value in lines]
    if info.node_reports:
        text.append("")
        text.append(f"{'NODE':<24} {'STATUS':<8} {'DURATION':>9}  OUTPUT")
        for report in info.node_reports:
            label = f"{report.node_id} ({report.node_type})"
            text.append(
                f"{label:<24} {report.status.value:<8} {report.duration_ms:>6.0f} ms  "
                f"{summarize(report.output_summary)}"
            )
    return "\n".join(text)


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def _one_line(value: Any, limit: int) -> str:
    """``value`` as compact JSON (non-ASCII kept as is), cut to ``limit`` characters."""
    import orjson

    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _cmd_cancel(args: argparse.Namespace) -> int:
    if args.terminate:
        accepted = _with_client(args, lambda c: c.terminate_run(args.workflow_id, args.reason))
    else:
        accepted = _with_client(args, lambda c: c.cancel_run(args.workflow_id, args.reason))
    print(f"{accepted.workflow_id}: {accepted.message}")
    return 0
