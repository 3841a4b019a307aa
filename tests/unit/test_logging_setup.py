"""Process logs: JSON lines with the ids of the node being run, secrets masked."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from spindle.shared.platform.logging_setup import bind_log_context, configure_logging, use_json
from spindle.shared.platform.settings import Settings

pytestmark = pytest.mark.unit


class TtyStream(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)


def capture(settings: Settings, stream: io.StringIO | None = None) -> io.StringIO:
    target = stream if stream is not None else io.StringIO()
    configure_logging(settings, target)
    return target


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


@pytest.mark.usefixtures("restore_root_logger")
def test_lines_are_json_with_the_ids_of_their_own_task() -> None:
    stream = capture(Settings(log_format="json"))
    log = logging.getLogger("spindle.test")

    async def node(run: str, node_id: str, bound: asyncio.Barrier) -> None:
        bind_log_context(run_id=run, node_id=node_id, node_type="tool")
        await bound.wait()  # both tasks have bound their ids before either logs
        log.info("ran %s", node_id)

    async def both() -> None:
        bound = asyncio.Barrier(2)
        await asyncio.gather(node("run-a", "fetch", bound), node("run-b", "summarise", bound))

    asyncio.run(both())
    log.warning("outside any node")

    lines = json_lines(stream)
    by_message = {line["message"]: line for line in lines}
    assert by_message["ran fetch"]["runId"] == "run-a"
    assert by_message["ran fetch"]["nodeId"] == "fetch"
    assert by_message["ran summarise"]["runId"] == "run-b"
    assert by_message["ran summarise"]["nodeType"] == "tool"
    outside = by_message["outside any node"]
    assert outside["level"] == "WARNING"
    assert outside["logger"] == "spindle.test"
    assert "runId" not in outside
    assert outside["ts"].endswith("+00:00")


@pytest.mark.usefixtures("restore_root_logger")
def test_payload_secrets_are_masked_and_the_snapshot_is_bounded() -> None:
    stream = capture(Settings(log_format="json", log_redact_keys=["ssn"], log_payload_max_chars=80))
    payload = {
        "query": "weather",
        "headers": {"Authorization": "Bearer abc123", "X-Api-Key": "spk_live"},
        "nested": [{"refresh_token": "tok-1", "user_ssn": "123-45"}],
        "password": "hunter2",
    }
    logging.getLogger("spindle.test").info("called", extra={"payload": payload})
    logging.getLogger("spindle.test").info("big", extra={"payload": {"text": "x" * 5000}})

    first, big = json_lines(stream)
    snapshot = first["payload"]
    for secret in ("abc123", "spk_live", "tok-1", "123-45", "hunter2"):
        assert secret not in snapshot
    assert "weather" in snapshot
    assert len(big["payload"]) == 81 and big["payload"].endswith("…")


@pytest.mark.usefixtures("restore_root_logger")
def test_text_lines_on_a_terminal_json_otherwise() -> None:
    assert use_json("auto", io.StringIO())
    assert not use_json("auto", TtyStream())
    assert not use_json("text", io.StringIO())
    assert use_json("json", TtyStream())

    stream = capture(Settings(log_format="auto"), TtyStream())
    bind_log_context(run_id="run-t", node_id="n1")
    logging.getLogger("spindle.test").info("hello", extra={"payload": {"token": "t0p"}})
    bind_log_context()
    line = stream.getvalue().strip()
    assert "INFO spindle.test [run-t n1]: hello" in line
    assert "t0p" not in line and '"token": "***"' in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)
