"""``spindle chat``: start a run (or attach to one) and hold its conversation.

::

    spindle chat approval-flow --input '{"topic": "Q3 budget"}'
    spindle chat --attach run-1234abcd

The conversation streams through the client SDK (history, then live, resumed
after a dropped connection) and renders as ``spindle.cli.chat.view`` describes.
At a REQUEST_INPUT the command asks the prompt's fields (``spindle.cli.chat.form``)
and sends the answer; an answer the run refuses (422) is shown with its
reasons and asked again. At the IDLE of an interactive agent (the ``chat``
example) it reads the next line (``you> ``) and sends it as a user message;
``/done`` completes the agent. The command ends with the conversation and exits 0
when the run completed, 1 when it failed or was cancelled.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from spindle.cli.client_options import add_client_flags, client_config
from spindle.cli.direct_access import THROUGH_GATEWAY, described


def add_chat_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "chat",
        help="start a run of a graph and hold its conversation in the terminal",
        description=described(
            "Start a run of GRAPH with --input (or --attach to a running run), show its "
            "messages live, and answer its prompts. When an interactive agent waits (IDLE), "
            "type the next message; /done completes the agent. Exits 0 when the run completes.",
            THROUGH_GATEWAY,
        ),
    )
    parser.add_argument("graph", nargs="?", metavar="GRAPH", help="a registered graph's name")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--input", default=None, metavar="JSON", help="the run's input, as JSON")
    source.add_argument(
        "--input-file", type=Path, default=None, metavar="FILE", help="the run's input, a JSON file"
    )
    source.add_argument(
        "--attach", default=None, metavar="WORKFLOW_ID", help="watch a run already started"
    )
    parser.add_argument(
        "--plain", action="store_true", help="plain text: no colours, no live region"
    )
    add_client_flags(parser)
    parser.set_defaults(handler=_cmd_chat)


def _read_input(args: argparse.Namespace) -> Any:
    import orjson

    from spindle.shared.contracts.errors import InvalidRequest

    text = args.input
    if args.input_file is not None:
        text = args.input_file.read_text()
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequest(f"--input is not valid JSON: {exc}") from None


def _cmd_chat(args: argparse.Namespace) -> int:
    from spindle.cli.chat.session import ChatSession
    from spindle.cli.terminal_output import TerminalOutput
    from spindle.shared.contracts.errors import InvalidRequest

    if args.attach is None and args.graph is None:
        raise InvalidRequest("name a GRAPH to start, or --attach WORKFLOW_ID")
    tty = sys.stdout.isatty() and os.environ.get("TERM") != "dumb" and not args.plain
    output = TerminalOutput(sys.stdout, live=tty, color=tty and "NO_COLOR" not in os.environ)
    read = input if sys.stdin.isatty() else _read_piped
    session = ChatSession(client_config(args), output, read=read)
    try:
        return asyncio.run(session.run(args.graph, _read_input(args), attach=args.attach))
    except KeyboardInterrupt:
        output.close()
        if session.workflow_id:
            print(
                f"\ndetached; the run goes on (spindle runs cancel {session.workflow_id})",
                file=sys.stderr,
            )
        return 130


def _read_piped(prompt: str) -> str:
    """``input`` for a non-terminal stdin: the answer is echoed, as a terminal would.

    Raises:
        EOFError: stdin has ended.
    """
    sys.stdout.write(prompt)
    line = sys.stdin.readline()
    if not line:
        sys.stdout.write("\n")
        raise EOFError
    answer = line.rstrip("\r\n")
    sys.stdout.write(answer + "\n")
    sys.stdout.flush()
    return answer
