"""How a ``spindle`` command finds its servers without a server: the state file a
running ``spindle dev`` writes, the precedence flag > environment > ``.env`` >
stack file > default, the worker metrics ports, and "cannot connect" errors that
name the setting and its variables."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from spindle.cli.client_options import client_config
from spindle.cli.main import build_parser, main
from spindle.cli.stack_settings import cli_settings
from spindle.dev.config import DevConfig, DevStackError, check_ports_free, port_free
from spindle.dev.processes import free_port
from spindle.dev.state import STATE_FILE, read_state, remove_state, write_state

pytestmark = pytest.mark.unit


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No Spindle variables from the test session, and a cwd without a .env."""
    for name in list(os.environ):
        if name.startswith("SPINDLE_") or name in ("REDIS_URL", "MONGO_URL", "TEMPORAL_ADDRESS"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def listening() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def stack_config(data_dir: Path, *, auth: bool = False) -> DevConfig:
    return DevConfig(
        data_dir=data_dir,
        gateway_port=41001,
        temporal_port=41002,
        temporal_ui_port=41003,
        redis_port=41004,
        mongo_port=41005,
        worker_metrics_port=41006,
        auth=auth,
    )


def test_the_state_file_names_every_part_and_is_ignored_once_its_process_is_gone(
    tmp_path: Path,
) -> None:
    config = stack_config(tmp_path)
    path = write_state(config)

    assert path == tmp_path / STATE_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    state = read_state(tmp_path)
    assert state is not None
    assert state.gateway_url == "http://127.0.0.1:41001"
    assert state.settings() == {
        "temporal_address": "127.0.0.1:41002",
        "temporal_ui_url": "http://127.0.0.1:41003",
        "redis_url": "redis://127.0.0.1:41004/0",
        "mongo_url": "mongodb://127.0.0.1:41005",
    }
    assert state.worker_metrics_port == 41006

    remove_state(tmp_path, pid=os.getpid() + 1)  # another stack's file stays
    assert path.is_file()
    remove_state(tmp_path)
    assert not path.exists()

    # A stack killed without cleaning up: its pid no longer runs.
    dead = _dead_pid()
    write_state(config, pid=dead)
    assert read_state(tmp_path) is None
    assert read_state(tmp_path, require_alive=False) is not None


def _dead_pid() -> int:
    """The process id of a process that has exited."""
    import subprocess
    import sys

    code = "import os; print(os.getpid())"
    child = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return int(child.stdout)


def test_commands_take_the_stack_file_below_environment_and_dotenv(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert cli_settings().mongo_url == "mongodb://127.0.0.1:27017"  # no stack: default
    write_state(stack_config(clean_env / ".spindle"))

    settings = cli_settings()
    assert settings.mongo_url == "mongodb://127.0.0.1:41005"
    assert settings.temporal_address == "127.0.0.1:41002"
    assert settings.redis_url == "redis://127.0.0.1:41004/0"

    (clean_env / ".env").write_text("SPINDLE_TEMPORAL_ADDRESS=from-dotenv:1\n")
    monkeypatch.setenv("MONGO_URL", "mongodb://from-env:2")
    settings = cli_settings()
    assert settings.temporal_address == "from-dotenv:1"
    assert settings.mongo_url == "mongodb://from-env:2"
    assert settings.redis_url == "redis://127.0.0.1:41004/0"


def test_spindle_data_dir_points_commands_at_another_stack(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_state(stack_config(clean_env / "elsewhere"))
    assert cli_settings().mongo_url == "mongodb://127.0.0.1:27017"
    monkeypatch.setenv("SPINDLE_DATA_DIR", str(clean_env / "elsewhere"))
    assert cli_settings().mongo_url == "mongodb://127.0.0.1:41005"


def test_gateway_commands_take_the_stack_gateway_and_its_admin_key(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = clean_env / ".spindle"
    (data_dir / "auth").mkdir(parents=True)
    (data_dir / "auth" / "admin-key").write_text("spk_admin\n")
    write_state(stack_config(data_dir, auth=True))

    args = build_parser().parse_args(["runs", "list"])
    config = client_config(args)
    assert (config.base_url, config.api_key) == ("http://127.0.0.1:41001", "spk_admin")

    flagged = client_config(build_parser().parse_args(["runs", "list", "--url", "http://x:1"]))
    assert flagged.base_url == "http://x:1"
    monkeypatch.setenv("SPINDLE_TOKEN", "a.jwt.token")
    monkeypatch.setenv("SPINDLE_URL", "http://y:2")
    from_env = client_config(args)
    assert (from_env.base_url, from_env.api_key, from_env.bearer_token) == (
        "http://y:2",
        None,
        "a.jwt.token",
    )


def test_the_second_worker_metrics_port_is_checked_too(listening: int) -> None:
    config = DevConfig(
        gateway_port=free_port(),
        temporal_port=free_port(),
        temporal_ui_port=free_port(),
        redis_port=free_port(),
        mongo_port=free_port(),
        worker_metrics_port=listening - 1,
    )
    with pytest.raises(DevStackError) as refused:
        check_ports_free(config)
    message = str(refused.value)
    assert f"port {listening} for the worker metrics" in message
    assert "--metrics-port" in message and "SPINDLE_WORKER_METRICS_PORT" in message


def test_spindle_worker_refuses_a_taken_metrics_port(
    clean_env: Path, listening: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", "--metrics-port", str(listening)]) == 1
    err = capsys.readouterr().err
    assert f"port {listening} for the worker metrics is already in use" in err
    assert "--metrics-port" in err and "SPINDLE_WORKER_METRICS_PORT" in err


def test_cannot_connect_errors_name_the_setting_and_its_variables(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    closed = free_port()
    monkeypatch.setenv("SPINDLE_URL", f"http://127.0.0.1:{closed}")
    assert main(["runs", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to the gateway" in err and "SPINDLE_URL" in err
    assert f"127.0.0.1:{closed}" in err

    write_state(replace(stack_config(clean_env / ".spindle"), mongo_port=free_port()))
    assert main(["graphs", "list"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to MongoDB at mongodb://127.0.0.1:" in err
    assert "SPINDLE_MONGO_URL or MONGO_URL" in err
    assert "taken from the running spindle dev stack" in err


def test_cannot_connect_to_temporal_names_the_setting_and_its_variables(
    clean_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # No variable and no stack: the default address, and the error says so.
    if not port_free("127.0.0.1", 7233):
        pytest.skip("a Temporal server listens on the default port on this machine")
    assert main(["runs", "replay", "wf-nowhere"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to Temporal at 127.0.0.1:7233" in err
    assert "setting temporal_address: SPINDLE_TEMPORAL_ADDRESS or TEMPORAL_ADDRESS" in err
    assert "no spindle dev stack found in ./.spindle" in err

    # A stack file: its (closed) address, named as taken from the stack.
    write_state(replace(stack_config(clean_env / ".spindle"), temporal_port=free_port()))
    assert main(["runs", "replay", "wf-nowhere"]) == 1
    err = capsys.readouterr().err
    assert "cannot connect to Temporal at 127.0.0.1:" in err
    assert "taken from the running spindle dev stack" in err
