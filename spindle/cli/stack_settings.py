"""How a ``spindle`` command finds its servers, and what it says when it cannot.

Each connection setting is taken, first to last, from:

1. the command's flag (``--url``, ``--api-key`` …), where it has one;
2. the environment variable (``SPINDLE_MONGO_URL``, ``SPINDLE_URL`` …), or the
   same name in ``./.env``;
3. the running ``spindle dev`` stack's state file, ``<data dir>/stack.json``
   (data dir: ``SPINDLE_DATA_DIR``, else ``./.spindle``; spindle.dev.state);
4. the built-in default (docs/operations/configuration.md).

So a command run beside ``spindle dev`` reaches that stack on whatever ports it was
given, with no variable set (docs/operations/cli.md, "How a command finds its
servers").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spindle.dev.state import StackState
    from spindle.shared.platform.settings import Settings


def environ_with_dotenv(path: Path = Path(".env")) -> dict[str, str]:
    """The process environment over the values of ``.env`` (as ``Settings`` reads)."""
    values: dict[str, str] = {}
    if path.is_file():
        from dotenv import dotenv_values

        values = {k: v for k, v in dotenv_values(path).items() if v is not None}
    return {**values, **os.environ}


def dev_stack() -> StackState | None:
    """The running ``spindle dev`` stack this command would fall back to, if any."""
    from spindle.dev.state import running_stack

    return running_stack(environ_with_dotenv())


def setting_variables(field: str) -> tuple[str, ...]:
    """The environment variables that set the ``Settings`` field ``field``."""
    from pydantic import AliasChoices

    from spindle.shared.platform.settings import Settings

    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    return (f"SPINDLE_{field.upper()}",)


def cli_settings() -> Settings:
    """The settings of a command: the environment and ``.env`` first, then a running
    dev stack's addresses for what neither sets, then the defaults."""
    from spindle.shared.platform.settings import Settings

    environ = environ_with_dotenv()
    state = dev_stack()
    overrides = {}
    if state is not None:
        for field, value in state.settings().items():
            if not any(environ.get(name) for name in setting_variables(field)):
                overrides[field] = value
    return Settings(**overrides)


def connect_hint(field: str) -> str:
    """``setting temporal_address: SPINDLE_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS``, and
    where the value came from, for an error that could not reach a server."""
    names = " or ".join(setting_variables(field))
    environ = environ_with_dotenv()
    if any(environ.get(name) for name in setting_variables(field)):
        source = "set in the environment"
    elif dev_stack() is not None:
        source = "taken from the running spindle dev stack"
    else:
        source = "the default: no variable set and no spindle dev stack found in " + (
            environ.get("SPINDLE_DATA_DIR") or "./.spindle"
        )
    return f"setting {field}: {names}; {source}"


def export_dev_stack_settings() -> StackState | None:
    """Put a running dev stack's addresses into ``os.environ`` for each connection
    setting no variable sets, for a process that reads ``Settings()`` itself
    (``spindle worker``/``gateway`` beside ``spindle dev``); the stack, if any."""
    environ = environ_with_dotenv()
    state = dev_stack()
    if state is None:
        return None
    for field, value in state.settings().items():
        names = setting_variables(field)
        if not any(environ.get(name) for name in names):
            os.environ[names[0]] = str(value)
    return state


def check_metrics_ports(port_flag: int | None) -> None:
    """Apply ``--metrics-port`` and refuse to start a worker whose metrics ports
    (``worker_metrics_port`` and the next, the SDK's) are taken.

    Raises:
        DevStackError: naming the port, the flag and the variable.
    """
    from spindle.dev.config import DevStackError, port_free
    from spindle.shared.platform.settings import Settings

    if port_flag is not None:
        os.environ["SPINDLE_WORKER_METRICS_PORT"] = str(port_flag)
    settings = Settings()
    port, host = settings.worker_metrics_port, settings.worker_metrics_host
    if port == 0:
        return
    for taken in (port, port + 1):
        if not port_free(host, taken):
            raise DevStackError(
                f"port {taken} for the worker metrics is already in use on {host} "
                f"(the metrics take worker_metrics_port {port} and the next port): choose "
                "another with --metrics-port or SPINDLE_WORKER_METRICS_PORT (0: off)"
            )
