"""Every ``spindle`` subcommand's ``--help`` says what it talks to: the gateway
(through the client SDK) or, for the few the gateway cannot serve, the server it
reaches directly and the variable that locates it."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from spindle.cli.main import build_parser

GATEWAY = "gateway"
TEMPORAL = "Temporal"
MONGO = "MongoDB"
SERVERS = "Temporal, Redis and MongoDB"
OWN_SERVERS = "its own servers"
OFFLOADED = "MongoDB, for offloaded payloads"
ADMIN = "the gateway, else MongoDB with --direct"

# Which subcommand talks to what. A new subcommand fails the test until it is here.
REACHES = {
    "dev": (OWN_SERVERS,),
    "worker": (SERVERS,),
    "gateway": (SERVERS,),
    "graphs register": (ADMIN,),
    "graphs list": (MONGO,),
    "keys create": (ADMIN,),
    "keys list": (ADMIN,),
    "keys revoke": (ADMIN,),
    "runs replay": (TEMPORAL, OFFLOADED),
    "runs timeline": (GATEWAY,),
    "runs list": (GATEWAY,),
    "runs describe": (GATEWAY,),
    "runs cancel": (GATEWAY,),
    "chat": (GATEWAY,),
    "archive prune": (MONGO,),
    **{
        f"schedules {action}": (GATEWAY,)
        for action in (
            "create",
            "list",
            "get",
            "pause",
            "unpause",
            "trigger",
            "backfill",
            "delete",
        )
    },
}

# What the help must say for each, in the words a user reads.
SAYS = {
    GATEWAY: ["Goes through the gateway", "SPINDLE_URL", "--api-key", "--token"],
    TEMPORAL: ["Talks to Temporal directly (SPINDLE_TEMPORAL_ADDRESS"],
    MONGO: ["Talks to MongoDB directly (SPINDLE_MONGO_URL"],
    SERVERS: [
        "Talks to Temporal, Redis and MongoDB directly",
        "SPINDLE_TEMPORAL_ADDRESS",
        "SPINDLE_REDIS_URL",
        "SPINDLE_MONGO_URL",
    ],
    OWN_SERVERS: ["Starts its own servers"],
    OFFLOADED: ["offloaded are read from MongoDB (SPINDLE_MONGO_URL"],
    ADMIN: [
        "Goes through the gateway when one is known",
        "SPINDLE_URL",
        "--direct",
        "talks to MongoDB directly (SPINDLE_MONGO_URL",
    ],
}


def leaf_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``("runs timeline", its parser)`` for every command that runs something."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield " ".join(path), parser
        return
    for action in subcommands:
        for name, child in action.choices.items():
            yield from leaf_commands(child, (*path, name))


def flat(text: str) -> str:
    """Help text on one line: argparse wraps it anywhere."""
    return " ".join(text.split())


LEAVES = dict(leaf_commands(build_parser()))


def test_the_table_names_every_subcommand() -> None:
    assert sorted(LEAVES) == sorted(REACHES)


@pytest.mark.parametrize("command", sorted(REACHES))
def test_help_names_what_the_command_talks_to(command: str) -> None:
    shown = flat(LEAVES[command].format_help())

    for reach in REACHES[command]:
        for words in SAYS[reach]:
            assert words in shown, f"`spindle {command} --help` should say {words!r}"


@pytest.mark.parametrize("command", sorted(c for c, r in REACHES.items() if r == (GATEWAY,)))
def test_gateway_commands_take_the_gateway_flags_and_no_server_settings(command: str) -> None:
    shown = flat(LEAVES[command].format_help())

    assert "--url URL" in shown
    for server_variable in ("SPINDLE_MONGO_URL", "SPINDLE_TEMPORAL_ADDRESS", "SPINDLE_REDIS_URL"):
        assert server_variable not in shown
