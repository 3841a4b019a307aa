"""``spindle schedules``: schedules of your tenant, over the gateway's ``/schedules``.

::

    spindle schedules create ID --graph G (--cron EXPR | --every SECONDS) [--input JSON]
                             [--time-zone TZ] [--overlap POLICY] [--note TEXT] [--paused]
    spindle schedules list [--json]
    spindle schedules get ID [--json]
    spindle schedules pause|unpause ID [--note TEXT]
    spindle schedules trigger ID
    spindle schedules backfill ID --start ISO --end ISO
    spindle schedules delete ID

Like ``spindle runs list``, they talk to the gateway only (``--url``/``SPINDLE_URL``,
``--api-key``/``SPINDLE_API_KEY``); docs/schedules.md describes the routes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from spindle.cli.client_options import add_client_flags, client_config
from spindle.cli.direct_access import THROUGH_GATEWAY, described

OVERLAP_POLICIES = (
    "skip",
    "buffer_one",
    "buffer_all",
    "cancel_other",
    "terminate_other",
    "allow_all",
)


def add_schedules_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``spindle schedules`` and its actions."""
    parser = commands.add_parser(
        "schedules",
        help="graph runs started on a cron or an interval",
        description=described(
            "Schedules of your tenant: a registered graph started on a cron or an interval.",
            THROUGH_GATEWAY,
        ),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    create = _action(actions, "create", "create a schedule")
    create.add_argument("schedule_id", metavar="ID")
    create.add_argument("--graph", required=True, help="a registered graph's name")
    timing = create.add_mutually_exclusive_group(required=True)
    timing.add_argument("--cron", help="cron expression, e.g. '0 2 * * *'")
    timing.add_argument("--every", type=int, metavar="SECONDS", help="interval in seconds")
    create.add_argument("--input", default=None, help="run input as JSON")
    create.add_argument("--time-zone", default="UTC", help="IANA time zone (default UTC)")
    create.add_argument("--overlap", choices=OVERLAP_POLICIES, default="skip")
    create.add_argument("--note", default=None)
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--json", action="store_true", help="print the schedule as JSON")
    create.set_defaults(handler=_cmd_create)

    listing = _action(actions, "list", "your tenant's schedules")
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(handler=_cmd_list)

    get = _action(actions, "get", "a schedule: timing, state, next and recent runs")
    get.add_argument("schedule_id", metavar="ID")
    get.add_argument("--json", action="store_true", help="print the schedule as JSON")
    get.set_defaults(handler=_cmd_get)

    for name, what in (("pause", "pause a schedule"), ("unpause", "unpause a schedule")):
        action = _action(actions, name, what)
        action.add_argument("schedule_id", metavar="ID")
        action.add_argument("--note", default=None, help="why")
        action.set_defaults(handler=_cmd_pause, action=name)

    trigger = _action(actions, "trigger", "start one run now")
    trigger.add_argument("schedule_id", metavar="ID")
    trigger.set_defaults(handler=_cmd_trigger)

    backfill = _action(actions, "backfill", "start the runs of a past span")
    backfill.add_argument("schedule_id", metavar="ID")
    backfill.add_argument("--start", required=True, help="ISO 8601 with offset")
    backfill.add_argument("--end", required=True, help="ISO 8601 with offset")
    backfill.set_defaults(handler=_cmd_backfill)

    delete = _action(actions, "delete", "delete a schedule (its runs keep running)")
    delete.add_argument("schedule_id", metavar="ID")
    delete.set_defaults(handler=_cmd_delete)


def _action(
    actions: argparse._SubParsersAction[argparse.ArgumentParser], name: str, what: str
) -> argparse.ArgumentParser:
    parser = actions.add_parser(
        name, help=what, description=described(f"{what[0].upper()}{what[1:]}.", THROUGH_GATEWAY)
    )
    add_client_flags(parser)
    return parser


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> Any:
    """One request to the gateway; an error answer raises the SDK's ``ApiError``."""
    from spindle.client.errors import raise_for_status

    async def run() -> Any:
        async with client_config(args).http_client() as http:
            reply = await http.request(method, path, json=body)
            raise_for_status(reply)
            return reply.json() if reply.content else None

    return asyncio.run(run())


def _print_json(value: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def _timing(schedule: dict[str, Any]) -> str:
    if schedule.get("cron"):
        return f"cron {schedule['cron']} ({schedule.get('time_zone', 'UTC')})"
    return f"every {schedule.get('interval_seconds')} s"


def _show(schedule: dict[str, Any], as_json: bool) -> int:
    if as_json:
        _print_json(schedule)
        return 0
    lines = [
        ("id", schedule["id"]),
        ("graph", schedule["graph"]),
        ("when", _timing(schedule)),
        ("overlap", schedule["overlap"]),
        ("state", "paused" if schedule["paused"] else "active"),
        ("note", schedule.get("note") or "-"),
        ("next", ", ".join(schedule.get("next_runs", [])[:3]) or "-"),
        ("started", str(schedule.get("runs_started", 0))),
    ]
    print("\n".join(f"{name:<8} {value}" for name, value in lines))
    for run in schedule.get("recent_runs", []):
        print(f"  run {run['workflow_id']} (scheduled {run['scheduled_at']})")
    return 0


def _cmd_create(args: argparse.Namespace) -> int:
    import orjson

    body: dict[str, Any] = {
        "id": args.schedule_id,
        "graph": args.graph,
        "time_zone": args.time_zone,
        "overlap": args.overlap,
        "paused": args.paused,
    }
    if args.input is not None:
        try:
            body["input"] = orjson.loads(args.input)
        except orjson.JSONDecodeError as exc:
            print(f"spindle: error: --input is not JSON: {exc}", file=sys.stderr)
            return 2
    if args.cron is not None:
        body["cron"] = args.cron
    else:
        body["interval_seconds"] = args.every
    if args.note is not None:
        body["note"] = args.note
    return _show(_call(args, "POST", "/schedules", body), args.json)


def _cmd_list(args: argparse.Namespace) -> int:
    schedules = _call(args, "GET", "/schedules")["schedules"]
    if args.json:
        _print_json(schedules)
        return 0
    if not schedules:
        print("no schedules")
        return 0
    for schedule in schedules:
        state = "paused" if schedule["paused"] else "active"
        print(f"{schedule['id']:<24} {state:<7} {schedule['graph']:<20} {_timing(schedule)}")
    return 0


def _cmd_get(args: argparse.Namespace) -> int:
    return _show(_call(args, "GET", f"/schedules/{args.schedule_id}"), args.json)


def _cmd_pause(args: argparse.Namespace) -> int:
    body = {"note": args.note} if args.note else None
    schedule = _call(args, "POST", f"/schedules/{args.schedule_id}/{args.action}", body)
    print(f"{schedule['id']}: {'paused' if schedule['paused'] else 'active'}")
    return 0


def _cmd_trigger(args: argparse.Namespace) -> int:
    accepted = _call(args, "POST", f"/schedules/{args.schedule_id}/trigger")
    print(f"{accepted['schedule_id']}: {accepted['message']}")
    return 0


def _cmd_backfill(args: argparse.Namespace) -> int:
    body = {"start": args.start, "end": args.end}
    accepted = _call(args, "POST", f"/schedules/{args.schedule_id}/backfill", body)
    print(f"{accepted['schedule_id']}: {accepted['message']}")
    return 0


def _cmd_delete(args: argparse.Namespace) -> int:
    _call(args, "DELETE", f"/schedules/{args.schedule_id}")
    print(f"{args.schedule_id}: deleted")
    return 0
