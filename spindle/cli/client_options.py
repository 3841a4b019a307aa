"""The connection flags of the commands that talk to a gateway as a client
(``spindle chat``, ``spindle runs list|describe|cancel``).

Each flag falls back to an environment variable: ``--url`` to ``SPINDLE_URL``,
``--api-key`` to ``SPINDLE_API_KEY``, ``--token`` to ``SPINDLE_TOKEN``; then to the
running ``spindle dev`` stack (its gateway, and with ``--auth`` its first admin key,
from its data dir: spindle.cli.stack_settings); then the URL defaults to
``http://127.0.0.1:8000``.
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
        help=(
            "the gateway's address [SPINDLE_URL; else the running spindle dev stack's; "
            "default http://127.0.0.1:8000]"
        ),
    )
    group.add_argument(
        "--api-key",
        default=None,
        help="an API key [SPINDLE_API_KEY; else a spindle dev --auth stack's admin key]",
    )
    group.add_argument("--token", default=None, help="a bearer JWT [SPINDLE_TOKEN]")


def client_config(args: argparse.Namespace) -> ClientConfig:
    """The SDK configuration the flags (over the environment) describe."""
    from spindle.cli.stack_settings import dev_stack, environ_with_dotenv
    from spindle.client.config import API_KEY_ENV, TOKEN_ENV, URL_ENV, ClientConfig

    environ = environ_with_dotenv()
    url, api_key = args.url, args.api_key
    state = dev_stack()
    if state is not None:
        if url is None and not environ.get(URL_ENV):
            url = state.gateway_url
        credentials = (args.token, environ.get(API_KEY_ENV), environ.get(TOKEN_ENV))
        if api_key is None and not any(credentials):
            api_key = state.admin_key()
    return ClientConfig.from_env(environ, base_url=url, api_key=api_key, bearer_token=args.token)
