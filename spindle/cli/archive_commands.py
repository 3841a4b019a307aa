"""``spindle archive prune``: delete old runs from the configured MongoDB archive.

::

    spindle archive prune [--older-than-days N] [--dry-run]

Deletes runs created more than N days ago (default: the ``archive_retention_days``
setting) together with their stream's messages,
their node reports, their NodeMessage trace and their map item pages (and any item
page stored more than N days ago), and prints how many of each.
pymongo is imported when the command runs, not when ``spindle`` builds its parser.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING

from spindle.cli.direct_access import MONGO_DIRECT, described

if TYPE_CHECKING:
    from spindle.cli.archive_retention import PruneCounts


def add_archive_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "archive",
        help="maintain the MongoDB archive",
        description=described("Maintain the archive.", MONGO_DIRECT),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    prune = actions.add_parser(
        "prune",
        help="delete runs older than N days with their messages, reports, trace, item pages",
        description=described(
            "Delete runs created more than N days ago (default: the archive_retention_days "
            "setting) with their messages, node reports, "
            "NodeMessage trace and map item pages (and any item page stored more than N "
            "days ago), and print how many of each.",
            MONGO_DIRECT,
        ),
    )
    prune.add_argument(
        "--older-than-days",
        type=_non_negative,
        default=None,
        metavar="N",
        help="delete runs created more than N days ago (fractions allowed; default: "
        "the archive_retention_days setting, SPINDLE_ARCHIVE_RETENTION_DAYS)",
    )
    prune.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    prune.set_defaults(handler=_cmd_prune)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


async def _prune(days: float | None, dry_run: bool) -> PruneCounts:
    from spindle.cli.archive_retention import cutoff_for, prune_runs
    from spindle.cli.stack_settings import cli_settings
    from spindle.shared.store.archive import RunArchive

    settings = cli_settings()
    if days is None:
        days = settings.archive_retention_days
    archive = RunArchive.from_settings(settings)
    try:
        return await prune_runs(archive, older_than=cutoff_for(days), dry_run=dry_run)
    finally:
        await archive.close()


def _cmd_prune(args: argparse.Namespace) -> int:
    counts = asyncio.run(_prune(args.older_than_days, args.dry_run))
    verb = "would delete" if args.dry_run else "deleted"
    print(
        f"{verb} {counts.runs} runs, {counts.messages} messages, "
        f"{counts.node_reports} node reports, {counts.trace_messages} trace messages, "
        f"{counts.item_pages} item pages"
    )
    return 0
