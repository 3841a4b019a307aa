"""The connection flags of the commands that talk to a gateway as a client
(``spindle chat``, ``spindle runs list|describe|cancel``).

Each flag falls back to an environment variable: ``--url`` to ``SPINDLE_URL``
(default ``http://127.0.0.1:8000``, where ``spindle dev`` listens),
``--api-key`` to ``SPINDLE_API_KEY``, ``--token`` to ``SPINDLE_TOKEN``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spindle.client.config import ClientConfig


def add_client_flags(parser: argparse.ArgumentParser) -> None:
    """Add ``--url``, ``--api-key`` and ``--token`` to a command."""
    group = parser.add_argument_group("gateway")
    # Literal names: building the parser must not import the SDK (``spindle --help``
    # stays instant); spindle.client.config defines the same ones.
    group.add_argument(
        "--url",
        default=None,
        help="the gateway's address [SPINDLE_URL; default http://127.0.0.1:8000]",
    )
    group.add_argument("--api-key", default=None, help="an API key [SPINDLE_API_KEY]")
    group.add_argument("--token", default=None, help="a bearer JWT [SPINDLE_TOKEN]")


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The SDK configuration the flags (over the environment) describe."""
    from spindle.client.config import ClientConfig

    return ClientConfig.from_env(base_url=args.url, api_key=args.api_key, bearer_token=args.token)
