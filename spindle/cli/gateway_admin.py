"""Admin commands through the gateway: ``spindle keys`` and ``spindle graphs register``.

They go through the gateway (``/keys``, ``PUT /graphs/{name}``, role-checked there)
whenever a gateway is known: ``--url``, ``SPINDLE_URL``, or a running ``spindle dev``
stack (its stack file). ``--direct`` writes to MongoDB instead, for bootstrap: the
first admin key of a tenant, or no gateway running yet (docs/operations/cli.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from spindle.cli.client_options import add_client_flags


def add_route_flags(parser: argparse.ArgumentParser) -> None:
    """``--url``/``--api-key``/``--token`` and ``--direct``."""
    add_client_flags(parser)
    parser.add_argument(
        "--direct",
        action="store_true",
        help=(
            "write to MongoDB directly (SPINDLE_MONGO_URL, SPINDLE_MONGO_DB), not through "
            "the gateway: for the first admin key, or when no gateway runs"
        ),
    )


def through_gateway(args: argparse.Namespace) -> bool:
    """Whether the command goes through the gateway: a gateway is known and
    ``--direct`` was not given."""
    if args.direct:
        return False
    from spindle.cli.stack_settings import dev_stack, environ_with_dotenv
    from spindle.client.config import URL_ENV

    return bool(args.url or environ_with_dotenv().get(URL_ENV) or dev_stack() is not None)


def gateway_call(
    args: argparse.Namespace,
    method: str,
    path: str,
    *,
    json: Any = None,
    params: dict[str, str] | None = None,
    content: bytes | None = None,
    content_type: str | None = None,
) -> Any:
    """One request to the gateway the flags name; its JSON answer.

    Raises:
        ApiError: the gateway's problem answer (403 names the roles it needs).
        ConnectionFailed: no gateway answered.
    """
    import httpx

    from spindle.cli.client_options import client_config
    from spindle.client.errors import ConnectionFailed, raise_for_status

    config = client_config(args)
    headers = config.headers()
    if content_type is not None:
        headers["Content-Type"] = content_type
    try:
        with httpx.Client(
            base_url=config.base_url, headers=headers, timeout=config.timeout
        ) as client:
            response = client.request(method, path, json=json, params=params, content=content)
    except httpx.TransportError as exc:
        raise ConnectionFailed(f"{config.base_url}: {exc}") from exc
    raise_for_status(response)
    return response.json()
