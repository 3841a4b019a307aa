"""The ``spindle`` command.

::

    spindle dev                       the embedded default stack, one command
    spindle worker                    the Temporal worker alone (a deployment's worker)
    spindle gateway                   the HTTP gateway alone (a deployment's gateway)
    spindle graphs register FILE...   validate and store graph definitions
    spindle graphs list               the registered graphs
    spindle runs replay WORKFLOW_ID   replay a run's Temporal history with this code
    spindle runs timeline WORKFLOW_ID a run's node executions, from its bundle
    spindle runs list|describe|cancel runs as the gateway's clients see them
    spindle chat GRAPH --input JSON   start a run and hold its conversation
    spindle keys create|list|revoke   API keys
    spindle archive prune             delete old runs from the archive

Commands that read or act on runs go through the gateway with the client SDK;
the others say in their ``--help`` which server they talk to directly
(``spindle.cli.direct_access``).

Each command lives in a ``_cmd_*`` function and is added by an ``_add_*``
function, so a new command (``replay``, ``timeline``, ``keys``) is one more
pair. Heavy modules are imported inside the command that needs them, which
keeps ``spindle --help`` instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spindle.cli.direct_access import GATEWAY_OR_MONGO, MONGO_DIRECT, SERVERS_DIRECT, described
from spindle.cli.gateway_admin import add_route_flags, gateway_call, through_gateway
from spindle.cli.stack_settings import environ_with_dotenv

Handler = Callable[[argparse.Namespace], int]

GRAPHS_REACH = (
    "register goes through the gateway when one is known (--direct: MongoDB); "
    "list reads MongoDB directly (SPINDLE_MONGO_URL, SPINDLE_MONGO_DB)."
)


def _port(text: str) -> int:
    from spindle.dev.config import DevStackError, parse_port

    try:
        return parse_port(text, name="port")
    except DevStackError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _metrics_port(text: str) -> int:
    """A port, or 0 for metrics off (``spindle dev`` and ``spindle worker`` alike)."""
    from spindle.dev.config import DevStackError, parse_port

    try:
        return parse_port(text, name="port", zero_is_off=True)
    except DevStackError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- dev ---------------------------------------------------------------------


def _add_dev(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from spindle.dev.config import CAN_BE_OFF, DATA_DIR_ENV, HOST_ENV, PORT_OPTIONS

    parser = commands.add_parser(
        "dev",
        help="run the embedded default stack (Temporal, Redis, MongoDB, worker, gateway)",
        description=(
            "Start a Temporal dev server, Redis (REDIS_URL or an embedded server), "
            "MongoDB (MONGO_URL or an embedded wire-protocol server), the worker and "
            "the gateway; register the example graphs; stop everything on Ctrl-C. "
            "Starts its own servers: needs no SPINDLE_* connection settings. "
            "Each flag also reads the environment variable named in its help; "
            "the flag wins."
        ),
    )
    parser.add_argument(
        "--host", default=None, help=f"address to listen on [{HOST_ENV}; default 127.0.0.1]"
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help=f"where data and logs go [{DATA_DIR_ENV}; default ./.spindle]",
    )
    for option in PORT_OPTIONS:
        off = option.key in CAN_BE_OFF
        parser.add_argument(
            option.flag,
            dest=option.key,
            type=_metrics_port if off else _port,
            default=None,
            metavar="PORT",
            help=(
                f"{option.what} port [{option.env}; default {option.default}"
                f"{'; 0: off' if off else ''}]"
            ),
        )
    parser.add_argument(
        "--auth",
        action="store_true",
        help=(
            "turn authentication on and print a first admin API key "
            "(kept in <data dir>/auth; default: auth off)"
        ),
    )
    parser.set_defaults(handler=_cmd_dev)


def _cmd_dev(args: argparse.Namespace) -> int:
    from spindle.dev.config import resolve_dev_config
    from spindle.dev.stack import run_dev

    config = resolve_dev_config(vars(args), environ_with_dotenv())
    return run_dev(config)


# -- worker / gateway --------------------------------------------------------


def _add_worker(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "worker",
        help="run the Temporal worker against configured servers",
        description=described(
            "Run the worker in this process, configured by SPINDLE_* variables.",
            SERVERS_DIRECT,
        ),
    )
    parser.add_argument(
        "--task-queue",
        action="append",
        dest="task_queues",
        metavar="QUEUE",
        help=(
            "poll this task queue (repeatable; default: SPINDLE_WORKER_TASK_QUEUES, else "
            "SPINDLE_TASK_QUEUE). The main queue runs workflows and activities, any other "
            "only the activities of the nodes a graph routes to it"
        ),
    )
    parser.add_argument(
        "--metrics-port",
        type=_metrics_port,
        default=None,
        metavar="PORT",
        help=(
            "port of the worker's Prometheus metrics; the Temporal SDK's take the next "
            "[SPINDLE_WORKER_METRICS_PORT; default 9464; 0: off]"
        ),
    )
    parser.set_defaults(handler=_cmd_worker)


def _cmd_worker(args: argparse.Namespace) -> int:
    from spindle.cli.stack_settings import check_metrics_ports, export_dev_stack_settings
    from spindle.worker.main import main as worker_main

    _say_dev_stack(export_dev_stack_settings())
    check_metrics_ports(args.metrics_port)
    worker_main(args.task_queues)
    return 0


def _say_dev_stack(state: Any) -> None:
    if state is not None:
        print(
            f"spindle: connecting to the spindle dev stack of {state.data_dir} "
            "(its stack.json) where no variable names a server",
            file=sys.stderr,
        )


def _add_gateway(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "gateway",
        help="run the HTTP gateway against configured servers",
        description=described(
            "Run the gateway in this process, configured by SPINDLE_* variables.",
            SERVERS_DIRECT,
        ),
    )
    parser.set_defaults(handler=_cmd_gateway)


def _cmd_gateway(args: argparse.Namespace) -> int:
    from spindle.cli.stack_settings import export_dev_stack_settings
    from spindle.gateway.main import main as gateway_main

    _say_dev_stack(export_dev_stack_settings())
    gateway_main()
    return 0


# -- graphs ------------------------------------------------------------------


def _add_graphs(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "graphs",
        help="register and list graph definitions",
        description=described("Register and list graph definitions.", GRAPHS_REACH),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    register = actions.add_parser(
        "register",
        help="validate YAML/JSON graph files and store them in the archive",
        description=described(
            "Validate every file against the node types and tools the workers offer, "
            "then store them. Through the gateway each file is a PUT /graphs/{name} in "
            "the caller's tenant (a role in graph_write_roles), stopping at the first "
            "refused; with --direct for any --tenant, and if one is invalid none is stored.",
            GATEWAY_OR_MONGO,
        ),
    )
    register.add_argument("files", nargs="*", type=Path, metavar="FILE")
    register.add_argument(
        "--examples", action="store_true", help="also register the bundled example graphs"
    )
    register.add_argument(
        "--tenant",
        default=None,
        help="owning tenant, with --direct (default: default); the gateway uses the caller's",
    )
    add_route_flags(register)
    register.set_defaults(handler=_cmd_graphs_register)

    listing = actions.add_parser(
        "list",
        help="list the registered graphs",
        description=described(
            "List the registered graphs of every tenant (or of --tenant), which the "
            "gateway's GET /graphs (the caller's own tenant) cannot.",
            MONGO_DIRECT,
        ),
    )
    listing.add_argument("--tenant", default=None, help="only this tenant's graphs")
    listing.add_argument("--json", action="store_true", help="print the full specs as JSON")
    listing.set_defaults(handler=_cmd_graphs_list)


def _cmd_graphs_register(args: argparse.Namespace) -> int:
    import asyncio

    from spindle.cli.stack_settings import cli_settings
    from spindle.shared.contracts.errors import GraphInvalid, InvalidRequest
    from spindle.shared.store.graph_registry import load_graph_file, register_graphs
    from spindle.worker.examples import examples_with_origin

    if not args.files and not args.examples:
        raise InvalidRequest("name at least one graph FILE, or pass --examples")
    specs = []
    if args.examples:
        specs += examples_with_origin()
    problems: list[str] = []
    for path in args.files:
        try:
            specs.append((str(path), load_graph_file(path)))
        except GraphInvalid as exc:
            problems.append(exc.detail)
    if problems:
        raise GraphInvalid("\n".join(problems))
    if through_gateway(args):
        names = _register_through_gateway(args, specs)
    else:
        tenant = args.tenant or "default"
        names = asyncio.run(register_graphs(cli_settings(), specs, tenant_id=tenant))
    print(f"registered {len(names)} graph(s): {', '.join(names)}")
    return 0


def _register_through_gateway(args: argparse.Namespace, specs: list[Any]) -> list[str]:
    """PUT each spec to the gateway, in order; stops at the first refused, naming
    what was registered before it."""
    from spindle.shared.contracts.errors import InvalidRequest, SpindleError

    if args.tenant is not None:
        raise InvalidRequest(
            "--tenant needs --direct: through the gateway a graph is registered in the "
            "caller's own tenant"
        )
    names: list[str] = []
    for origin, spec in specs:
        body = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            gateway_call(args, "PUT", f"/graphs/{spec.name}", json=body)
        except SpindleError as exc:
            done = f" (registered before it: {', '.join(names)})" if names else ""
            exc.detail = f"{origin}: {exc.detail}{done}"
            raise
        names.append(spec.name)
    return names


def _cmd_graphs_list(args: argparse.Namespace) -> int:
    import asyncio

    from spindle.cli.stack_settings import cli_settings
    from spindle.shared.store.graph_registry import list_graphs

    graphs = asyncio.run(list_graphs(cli_settings(), tenant_id=args.tenant))
    if args.json:
        import orjson

        dumped = [g.model_dump(mode="json", by_alias=True, exclude_none=True) for g in graphs]
        sys.stdout.write(orjson.dumps(dumped, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if not graphs:
        print("no graphs registered")
        return 0
    rows = [("NAME", "VERSION", "NODES", "DESCRIPTION")]
    rows += [(g.name, g.version, str(len(g.nodes)), g.description) for g in graphs]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row[:3], widths, strict=True)), row[3])
    return 0


# -- entry point -------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, for ``main`` and for tests."""
    parser = argparse.ArgumentParser(
        prog="spindle",
        description="Durable AI agent graph runs on Temporal, streamed live over SSE.",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _add_dev(commands)
    _add_worker(commands)
    _add_gateway(commands)
    _add_graphs(commands)
    from spindle.cli.archive_commands import add_archive_command
    from spindle.cli.chat.command import add_chat_command
    from spindle.cli.key_commands import add_keys_command
    from spindle.cli.run_commands import add_runs_command
    from spindle.cli.schedule_commands import add_schedules_command

    add_keys_command(commands)
    add_runs_command(commands)
    add_chat_command(commands)
    add_archive_command(commands)
    add_schedules_command(commands)
    return parser


def _user_error(exc: Exception) -> str | None:
    """The message to print for an error the user can act on, else None."""
    from spindle.dev.config import DevStackError
    from spindle.dev.processes import ProcessFailed
    from spindle.shared.contracts.errors import SpindleError

    unreachable = _unreachable(exc)
    if unreachable is not None:
        return unreachable
    if isinstance(exc, SpindleError):
        return exc.detail
    if isinstance(exc, DevStackError | ProcessFailed):
        return str(exc)
    return None


def _unreachable(exc: Exception) -> str | None:
    """A "cannot connect" message naming the setting, its variables and where the
    value came from (flag, environment, the running dev stack, or the default)."""
    import httpx
    from pymongo.errors import ConnectionFailure

    from spindle.cli.stack_settings import cli_settings, connect_hint
    from spindle.client.errors import ConnectionFailed
    from spindle.shared.platform.logging_setup import redact_url

    if isinstance(exc, ConnectionFailed | httpx.TransportError):
        detail = exc.detail if isinstance(exc, ConnectionFailed) else str(exc)
        return (
            f"cannot connect to the gateway: {detail} (setting: --url or SPINDLE_URL, "
            "else the running spindle dev stack's gateway; default http://127.0.0.1:8000)"
        )
    # The stores wrap pymongo's error in an Unavailable of their own.
    cause = exc if isinstance(exc, ConnectionFailure) else exc.__cause__
    if isinstance(cause, ConnectionFailure):
        url = redact_url(cli_settings().mongo_url)
        return f"cannot connect to MongoDB at {url} ({connect_hint('mongo_url')}): {cause}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``spindle`` command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        message = _user_error(exc)
        if message is None:
            raise
        print(f"spindle: error: {message}", file=sys.stderr)
        return 1


def _run() -> Any:  # pragma: no cover - module entry
    sys.exit(main())


if __name__ == "__main__":
    _run()
