"""The ``spindle`` command line without servers: where each setting of
``spindle dev`` comes from, refusing taken ports before anything starts, and
the argument checks of ``spindle graphs``."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spindle.cli.main import build_parser, main
from spindle.cli.stack_settings import environ_with_dotenv
from spindle.dev.config import (
    PORT_OPTIONS,
    DevConfig,
    DevStackError,
    check_ports_free,
    resolve_dev_config,
    taken_ports,
)
from spindle.dev.processes import free_port, free_port_pair
from spindle.dev.stack import DevStack, child_env
from spindle.shared.contracts.errors import OutboundRefused
from spindle.shared.platform.outbound import outbound_policy
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit


def dev_flags(*argv: str) -> dict[str, object]:
    return vars(build_parser().parse_args(["dev", *argv]))


@pytest.fixture
def listening() -> Iterator[int]:
    """A port some other program is listening on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Spindle variables from the test session, and a cwd without a .env."""
    import os

    for name in list(os.environ):
        if name.startswith("SPINDLE_") or name in ("REDIS_URL", "MONGO_URL"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("option", PORT_OPTIONS, ids=lambda o: o.flag)
def test_port_flag_beats_environment_beats_default(option) -> None:
    env = {option.env: "40001"}
    from_flag = resolve_dev_config(dev_flags(option.flag, "40002"), env)
    from_env = resolve_dev_config(dev_flags(), env)
    default = resolve_dev_config(dev_flags(), {})

    assert getattr(from_flag, option.key) == 40002
    assert getattr(from_env, option.key) == 40001
    assert getattr(default, option.key) == option.default


def test_host_and_data_dir_follow_the_same_precedence() -> None:
    env = {"SPINDLE_HOST": "0.0.0.0", "SPINDLE_DATA_DIR": "/srv/spindle"}

    assert resolve_dev_config(dev_flags(), {}) == DevConfig()
    from_env = resolve_dev_config(dev_flags(), env)
    assert (from_env.host, from_env.data_dir) == ("0.0.0.0", Path("/srv/spindle"))
    from_flags = resolve_dev_config(dev_flags("--host", "127.0.0.2", "--data-dir", "d"), env)
    assert (from_flags.host, from_flags.data_dir) == ("127.0.0.2", Path("d"))
    # A wildcard bind address is dialled on loopback and printed that way.
    assert from_env.gateway_url == "http://127.0.0.1:8000"


def test_bad_port_in_environment_names_the_variable() -> None:
    with pytest.raises(DevStackError, match="SPINDLE_REDIS_PORT='six'"):
        resolve_dev_config(dev_flags(), {"SPINDLE_REDIS_PORT": "six"})
    with pytest.raises(DevStackError, match="SPINDLE_MONGO_PORT=70000"):
        resolve_dev_config(dev_flags(), {"SPINDLE_MONGO_PORT": "70000"})


def test_bad_port_flag_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["dev", "--gateway-port", "0"])
    assert exited.value.code == 2
    assert "--gateway-port" in capsys.readouterr().err


def test_dev_metrics_port_zero_turns_the_metrics_off() -> None:
    """``spindle dev --metrics-port 0`` is accepted as ``spindle worker``'s is:
    no metrics port is checked and the banner says "off"."""
    from_flag = resolve_dev_config(dev_flags("--metrics-port", "0"), {})
    from_env = resolve_dev_config(dev_flags(), {"SPINDLE_WORKER_METRICS_PORT": "0"})
    worker = build_parser().parse_args(["worker", "--metrics-port", "0"])

    assert from_flag.worker_metrics_port == from_env.worker_metrics_port == 0
    assert worker.metrics_port == 0
    option = next(o for o in PORT_OPTIONS if o.key == "worker_metrics_port")
    assert taken_ports(from_flag, option) == []
    stack = DevStack(from_flag)
    assert stack._metrics_row() == "off"
    # Other ports keep refusing 0, and metrics a negative port.
    with pytest.raises(SystemExit):
        build_parser().parse_args(["dev", "--metrics-port", "-1"])
    with pytest.raises(DevStackError, match="SPINDLE_REDIS_PORT=0"):
        resolve_dev_config(dev_flags(), {"SPINDLE_REDIS_PORT": "0"})


def test_redis_and_mongo_urls_replace_the_embedded_servers() -> None:
    plain = resolve_dev_config(
        dev_flags(), {"REDIS_URL": "redis://cache:6379/2", "MONGO_URL": "mongodb://db:27017"}
    )
    prefixed = resolve_dev_config(
        dev_flags(),
        {"REDIS_URL": "redis://ignored:1/0", "SPINDLE_REDIS_URL": "redis://cache:6379/3"},
    )

    assert plain.effective_redis_url == "redis://cache:6379/2"
    assert plain.effective_mongo_url == "mongodb://db:27017"
    assert [o.key for o in plain.bound_ports()] == [
        "gateway_port",
        "temporal_port",
        "temporal_ui_port",
        "worker_metrics_port",
    ]
    assert prefixed.effective_redis_url == "redis://cache:6379/3"
    assert "mongo_port" in [o.key for o in prefixed.bound_ports()]


def test_taken_port_is_refused_naming_its_flag_and_variable(listening: int) -> None:
    config = DevConfig(
        gateway_port=free_port(),
        temporal_port=free_port(),
        temporal_ui_port=free_port(),
        redis_port=listening,
        mongo_port=free_port(),
        worker_metrics_port=free_port_pair(),
    )
    with pytest.raises(DevStackError) as refused:
        check_ports_free(config)
    message = str(refused.value)
    assert f"port {listening}" in message
    assert "--redis-port" in message and "SPINDLE_REDIS_PORT" in message
    assert "REDIS_URL" in message  # the alternative: use the server that is there
    assert "--gateway-port" not in message


def test_a_port_held_by_an_external_server_is_not_checked(listening: int) -> None:
    config = DevConfig(
        gateway_port=free_port(),
        temporal_port=free_port(),
        temporal_ui_port=free_port(),
        redis_port=listening,
        mongo_port=free_port(),
        worker_metrics_port=free_port_pair(),
        redis_url=f"redis://127.0.0.1:{listening}/0",
    )
    check_ports_free(config)


def test_two_parts_on_one_port_are_refused() -> None:
    port = free_port()
    config = DevConfig(
        gateway_port=port,
        temporal_port=free_port(),
        temporal_ui_port=port,
        redis_port=free_port(),
        mongo_port=free_port(),
        worker_metrics_port=free_port_pair(),
    )
    with pytest.raises(DevStackError, match="--gateway-port and --temporal-ui-port are both"):
        check_ports_free(config)


def test_spindle_dev_on_a_taken_port_fails_before_starting_anything(
    clean_env: Path, listening: int, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir = clean_env / "data"
    code = main(
        [
            "dev",
            "--data-dir",
            str(data_dir),
            "--gateway-port",
            str(listening),
            "--temporal-port",
            str(free_port()),
            "--temporal-ui-port",
            str(free_port()),
            "--redis-port",
            str(free_port()),
            "--mongo-port",
            str(free_port()),
            "--metrics-port",
            str(free_port_pair()),
        ]
    )

    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("spindle: error: ")
    assert "--gateway-port" in err and "SPINDLE_GATEWAY_PORT" in err
    assert not data_dir.exists()


def test_port_from_environment_is_checked_too(
    clean_env: Path,
    listening: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SPINDLE_TEMPORAL_PORT", str(listening))
    for option in PORT_OPTIONS:
        if option.env != "SPINDLE_TEMPORAL_PORT":
            monkeypatch.setenv(option.env, str(free_port()))

    assert main(["dev", "--data-dir", str(clean_env / "data")]) == 1
    err = capsys.readouterr().err
    assert f"port {listening}" in err and "--temporal-port" in err


def test_dotenv_values_apply_below_the_real_environment(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (clean_env / ".env").write_text("SPINDLE_GATEWAY_PORT=9100\nREDIS_URL=redis://dotenv:1/0\n")
    monkeypatch.setenv("SPINDLE_GATEWAY_PORT", "9200")

    config = resolve_dev_config(dev_flags(), environ_with_dotenv())

    assert config.gateway_port == 9200
    assert config.redis_url == "redis://dotenv:1/0"


def test_worker_and_gateway_children_are_pointed_at_the_stack(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPINDLE_OFFLINE_TOKEN_DELAY_MS", raising=False)
    config = DevConfig(
        host="0.0.0.0",
        gateway_port=9001,
        temporal_port=9002,
        temporal_ui_port=9003,
        redis_port=9004,
        mongo_port=9005,
    )
    env = child_env(config)
    # What the child's Settings will read (env vars are matched by alias).
    settings = Settings.model_validate(env)

    assert settings.temporal_address == "127.0.0.1:9002"
    assert settings.temporal_ui_url == "http://127.0.0.1:9003"
    assert settings.redis_url == "redis://127.0.0.1:9004/0"
    assert settings.mongo_url == "mongodb://127.0.0.1:9005"
    assert (settings.gateway_host, settings.gateway_port) == ("0.0.0.0", 9001)
    assert settings.base_url == "http://127.0.0.1:9001"
    # The offline model is paced so the demo shows answers arriving token by token.
    assert env["SPINDLE_OFFLINE_TOKEN_DELAY_MS"] == "20"
    # Push callbacks to this machine work in development, and the banner says so;
    # everything else the outbound policy refuses stays refused.
    policy = outbound_policy(settings)
    for url in ("http://127.0.0.1:9999/hook", "http://[::1]:8080/", "http://localhost:8080/"):
        policy.check_url(url)
    with pytest.raises(OutboundRefused):
        policy.check_url("http://169.254.169.254/")
    (line,) = [ln for ln in DevStack(config).banner().splitlines() if "Push callbacks" in ln]
    assert "loopback allowed" in line


def test_graphs_register_needs_a_file_or_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graphs", "register"]) == 1
    assert "FILE" in capsys.readouterr().err


def test_graphs_register_names_every_unreadable_or_malformed_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\nentry: a\nnodes:\n  - id: a\n")  # node without a type
    missing = tmp_path / "missing.yaml"

    assert main(["graphs", "register", str(broken), str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"{broken}: node 'a': nodes.0.type" in err
    assert f"{missing}: cannot read" in err


def test_help_does_not_import_the_heavy_modules() -> None:
    probe = (
        "import sys; from spindle.cli.main import build_parser; build_parser(); "
        "print(sorted(m for m in ('pydantic', 'temporalio', 'pymongo', 'redis', 'worker') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
