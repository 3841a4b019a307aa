"""``spindle runs``: look into one run from a terminal.

::

    spindle runs replay WORKFLOW_ID     replay its Temporal history with this code
    spindle runs timeline WORKFLOW_ID   its node executions, in order, from the archive

``replay`` answers "would the workflow code deployed here still run this
history?": it exits 1 and prints the non-determinism error when it would not.
Temporal, pymongo and the worker are imported when a command runs, not when
``spindle`` builds its parser, so ``spindle --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from spindle.shared.platform.settings import Settings

# Longest input/output summary in a timeline row.
SUMMARY_CHARS = 60


def add_runs_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "runs", help="list, describe or cancel runs; replay a run's history or show its timeline"
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    replay = actions.add_parser(
        "replay",
        help="replay a run's Temporal history against this code (exit 1 on non-determinism)",
    )
    replay.add_argument("workflow_id", metavar="WORKFLOW_ID")
    replay.add_argument("--run-id", default=None, help="a specific run (default: the latest)")
    replay.set_defaults(handler=_cmd_replay)

    timeline = actions.add_parser(
        "timeline", help="the run's node executions: status, duration, input and output"
    )
    timeline.add_argument("workflow_id", metavar="WORKFLOW_ID")
    timeline.add_argument("--json", action="store_true", help="print the node reports as JSON")
    timeline.set_defaults(handler=_cmd_timeline)

    from spindle.cli.run_client_commands import add_client_actions

    add_client_actions(actions)


async def _connect(settings: Settings) -> Client:
    from temporalio.client import Client

    from spindle.shared.contracts.errors import Unavailable
    from spindle.shared.temporal.converter import data_converter

    try:
        return await Client.connect(
            settings.temporal_address,
            namespace=settings.temporal_namespace,
            data_converter=data_converter(settings),
        )
    except RuntimeError as exc:  # the SDK's "Failed client connect: …"
        raise Unavailable(f"Temporal at {settings.temporal_address}: {exc}") from exc


def _cmd_replay(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from spindle.shared.contracts.errors import NotFound
    from spindle.shared.platform.settings import get_settings
    from spindle.worker.replay import fetch_history, replay

    async def replayed() -> tuple[int, list[Any]]:
        client = await _connect(get_settings())
        try:
            history = await fetch_history(client, args.workflow_id, args.run_id)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise NotFound(f"Temporal has no run '{args.workflow_id}'") from exc
            raise
        return len(history.events), await replay([(args.workflow_id, history)])

    events, failures = asyncio.run(replayed())
    for failure in failures:
        print(f"FAIL {failure.workflow_id} (run {failure.run_id}): {failure.error}")
    if failures:
        return 1
    print(f"replayed {args.workflow_id}: {events} events, deterministic")
    return 0


def _cmd_timeline(args: argparse.Namespace) -> int:
    from pymongo.errors import PyMongoError

    from spindle.shared.contracts.errors import NotFound, Unavailable
    from spindle.shared.platform.settings import get_settings
    from spindle.shared.store.archive import RunArchive

    async def reports() -> list[dict[str, Any]]:
        settings = get_settings()
        archive = RunArchive.from_settings(settings)
        try:
            return await archive.node_reports(args.workflow_id)
        except PyMongoError as exc:
            raise Unavailable(f"MongoDB at {settings.mongo_url} is unavailable: {exc}") from exc
        finally:
            await archive.close()

    rows = asyncio.run(reports())
    if not rows:
        raise NotFound(f"the archive has no node reports of run '{args.workflow_id}'")
    if args.json:
        sys.stdout.write(json.dumps(rows, default=str, indent=2) + "\n")
        return 0
    table = [("NODE", "STATUS", "DURATION", "INPUT", "OUTPUT")]
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
    for row in table:
        cells = [cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)]
        print("  ".join([*cells, row[4]]).rstrip())
    return 0


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
