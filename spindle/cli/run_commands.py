"""``spindle runs``: look into, and act on, runs from a terminal.

::

    spindle runs replay WORKFLOW_ID     replay its Temporal history with this code
    spindle runs timeline WORKFLOW_ID   its node executions, in order (run_timeline)
    spindle runs list|describe|cancel   as a client of the gateway (run_client_commands)

All but ``replay`` go through the gateway with the client SDK. ``replay``
answers "would the workflow code deployed here still run this history?" (it
exits 1 and prints the non-determinism error when it would not); it reads the
history from Temporal itself, as it may name one execution (``--run-id``) and
must decode payloads with this deployment's converter. Temporal and the worker
are imported when a command runs, not when ``spindle`` builds its parser, so
``spindle --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

from spindle.cli.direct_access import OFFLOADED_PAYLOADS, TEMPORAL_DIRECT, described

if TYPE_CHECKING:
    from temporalio.client import Client

    from spindle.shared.platform.settings import Settings


def add_runs_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "runs", help="list, describe or cancel runs; replay a run's history or show its timeline"
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    replay = actions.add_parser(
        "replay",
        help="replay a run's Temporal history against this code (exit 1 on non-determinism)",
        description=described(
            "Replay the run's Temporal history against the workflow code installed here; "
            "exit 1 with the non-determinism error if it no longer replays.",
            TEMPORAL_DIRECT,
            OFFLOADED_PAYLOADS,
        ),
    )
    replay.add_argument("workflow_id", metavar="WORKFLOW_ID")
    replay.add_argument("--run-id", default=None, help="a specific run (default: the latest)")
    replay.set_defaults(handler=_cmd_replay)

    from spindle.cli.run_client_commands import add_client_actions
    from spindle.cli.run_timeline import add_timeline_action

    add_timeline_action(actions)
    add_client_actions(actions)


async def _connect(settings: Settings) -> Client:
    from spindle.cli.stack_settings import connect_hint
    from spindle.shared.contracts.errors import Unavailable
    from spindle.shared.temporal.client import connect_temporal

    try:
        return await connect_temporal(settings)
    except Unavailable as exc:
        raise Unavailable(
            f"cannot connect to Temporal at {settings.temporal_address} "
            f"({connect_hint('temporal_address')}): {exc.__cause__ or exc.detail}"
        ) from exc


def _cmd_replay(args: argparse.Namespace) -> int:
    from temporalio.service import RPCError, RPCStatusCode

    from spindle.cli.stack_settings import cli_settings
    from spindle.shared.contracts.errors import NotFound
    from spindle.worker.replay.histories import fetch_history
    from spindle.worker.replay.replayer import replay

    async def replayed() -> tuple[int, list[Any]]:
        client = await _connect(cli_settings())
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
