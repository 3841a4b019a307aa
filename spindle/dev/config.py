"""Configuration of ``spindle dev``: which port each part listens on, read from
flags, then environment variables, then defaults; and the check that those ports
are free before anything starts.

Standard library only, so ``spindle --help`` and these checks stay instant.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_DATA_DIR = Path(".spindle")
DEFAULT_HOST = "127.0.0.1"
HOST_ENV = "SPINDLE_HOST"
DATA_DIR_ENV = "SPINDLE_DATA_DIR"


class DevStackError(RuntimeError):
    """A configuration or start-up problem, worded for the person at the terminal."""


@dataclass(frozen=True)
class PortOption:
    """One port of the stack, settable by a flag and by an environment variable."""

    key: str
    flag: str
    env: str
    default: int
    what: str


# The embedded Redis and MongoDB default to the port next to the standard one,
# so they do not collide with servers a developer already runs.
PORT_OPTIONS: tuple[PortOption, ...] = (
    PortOption("gateway_port", "--gateway-port", "SPINDLE_GATEWAY_PORT", 8000, "gateway"),
    PortOption("temporal_port", "--temporal-port", "SPINDLE_TEMPORAL_PORT", 7233, "Temporal"),
    PortOption(
        "temporal_ui_port", "--temporal-ui-port", "SPINDLE_TEMPORAL_UI_PORT", 8233, "Temporal UI"
    ),
    PortOption("redis_port", "--redis-port", "SPINDLE_REDIS_PORT", 6380, "embedded Redis"),
    PortOption("mongo_port", "--mongo-port", "SPINDLE_MONGO_PORT", 27018, "embedded MongoDB"),
    # The worker's own setting (worker_metrics_port); the SDK's metrics take the
    # next port, which the checks below hold free too.
    PortOption(
        "worker_metrics_port",
        "--metrics-port",
        "SPINDLE_WORKER_METRICS_PORT",
        9464,
        "worker metrics",
    ),
)
# A port option that also takes the port after it (worker metrics: ours, then the SDK's).
TWO_PORTS = {"worker_metrics_port"}
# A port option 0 turns off (worker metrics, as ``spindle worker --metrics-port 0``).
CAN_BE_OFF = {"worker_metrics_port"}


@dataclass(frozen=True)
class DevConfig:
    """Where each part of the dev stack listens.

    ``redis_url`` / ``mongo_url`` name existing servers; when None the stack
    starts embedded ones on ``redis_port`` / ``mongo_port``.
    """

    host: str = DEFAULT_HOST
    data_dir: Path = DEFAULT_DATA_DIR
    gateway_port: int = 8000
    temporal_port: int = 7233
    temporal_ui_port: int = 8233
    redis_port: int = 6380
    mongo_port: int = 27018
    worker_metrics_port: int = 9464
    redis_url: str | None = None
    mongo_url: str | None = None
    # ``--auth``: authentication on, with a first admin key (spindle.dev.auth).
    auth: bool = False

    @property
    def connect_host(self) -> str:
        """The host clients dial: a wildcard bind address is reached on loopback."""
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host

    @property
    def gateway_url(self) -> str:
        return f"http://{self.connect_host}:{self.gateway_port}"

    @property
    def temporal_address(self) -> str:
        return f"{self.connect_host}:{self.temporal_port}"

    @property
    def temporal_ui_url(self) -> str:
        return f"http://{self.connect_host}:{self.temporal_ui_port}"

    @property
    def effective_redis_url(self) -> str:
        return self.redis_url or f"redis://{self.connect_host}:{self.redis_port}/0"

    @property
    def effective_mongo_url(self) -> str:
        return self.mongo_url or f"mongodb://{self.connect_host}:{self.mongo_port}"

    def bound_ports(self) -> list[PortOption]:
        """The port options this stack will listen on (not those of external servers)."""
        skipped = {
            "redis_port": self.redis_url is not None,
            "mongo_port": self.mongo_url is not None,
        }
        return [option for option in PORT_OPTIONS if not skipped.get(option.key, False)]


def resolve_dev_config(flags: Mapping[str, Any], environ: Mapping[str, str]) -> DevConfig:
    """Each setting from its flag, else its environment variable, else the default.

    Args:
        flags: parsed flag values by ``PortOption.key`` plus ``host`` and
            ``data_dir``; None means the flag was not given.
        environ: the environment (``os.environ``, with ``.env`` merged in).

    Raises:
        DevStackError: an environment variable holds no valid port.
    """
    values: dict[str, Any] = {}
    for option in PORT_OPTIONS:
        flag_value = flags.get(option.key)
        if flag_value is not None:
            values[option.key] = int(flag_value)
        elif environ.get(option.env):
            values[option.key] = parse_port(
                environ[option.env], name=option.env, zero_is_off=option.key in CAN_BE_OFF
            )
        else:
            values[option.key] = option.default
    host = flags.get("host") or environ.get(HOST_ENV) or DEFAULT_HOST
    data_dir = flags.get("data_dir") or environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR
    return DevConfig(
        host=str(host),
        data_dir=Path(data_dir),
        redis_url=environ.get("SPINDLE_REDIS_URL") or environ.get("REDIS_URL") or None,
        mongo_url=environ.get("SPINDLE_MONGO_URL") or environ.get("MONGO_URL") or None,
        auth=bool(flags.get("auth")),
        **values,
    )


def parse_port(text: str, *, name: str, zero_is_off: bool = False) -> int:
    """A TCP port number from text.

    Args:
        text: the flag's or variable's value.
        name: the flag or variable, for the error.
        zero_is_off: accept 0 (the part is turned off: worker metrics).

    Raises:
        DevStackError: naming ``name`` when the text is not a port 1-65535
            (or 0 with ``zero_is_off``).
    """
    try:
        port = int(text)
    except ValueError:
        raise DevStackError(f"{name}={text!r} is not a port number") from None
    if zero_is_off and port == 0:
        return 0
    if not 1 <= port <= 65535:
        raise DevStackError(f"{name}={port} is not a port number (1-65535)")
    return port


def port_free(host: str, port: int) -> bool:
    """True when a server could listen on ``host:port`` right now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # Servers set SO_REUSEADDR too, so a port held only by TIME_WAIT
        # connections counts as free, exactly as it will be for them.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise DevStackError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    return True


def taken_ports(config: DevConfig, option: PortOption) -> list[int]:
    """The ports ``option`` listens on (none for worker metrics turned off with 0)."""
    port = int(getattr(config, option.key))
    if option.key in TWO_PORTS:
        return [port, port + 1] if port else []
    return [port]


def check_ports_free(config: DevConfig) -> None:
    """Refuse to start when two parts share a port or a port is taken.

    Raises:
        DevStackError: naming the flag and environment variable of each port
            that is in use, so the user knows what to change.
    """
    problems: list[str] = []
    options = config.bound_ports()
    by_port: dict[int, PortOption] = {}
    for option in options:
        for port in taken_ports(config, option):
            if port in by_port:
                other = by_port[port]
                problems.append(
                    f"{other.flag} and {option.flag} are both {port}: give each its own port"
                )
            by_port[port] = option
    for option in options:
        for port in taken_ports(config, option):
            if port_free(config.host, port):
                continue
            hint = ""
            if option.key == "redis_port":
                hint = " (or set REDIS_URL to use the Redis server already there)"
            elif option.key == "mongo_port":
                hint = " (or set MONGO_URL to use the MongoDB server already there)"
            problems.append(
                f"port {port} for the {option.what} is already in use on {config.host}: "
                f"choose another with {option.flag} or {option.env}{hint}"
            )
    if problems:
        raise DevStackError("\n".join(problems))
