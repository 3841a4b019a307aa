"""The published seed-002 client, ``@vertesia/client`` from npm, unchanged, against
the gateway: gzip history, then live SSE, surviving a dropped connection, and a
``UserInput`` signal answering the run's HITL prompt.

The client reaches the gateway through a small TCP proxy on loopback so the test
can cut the live stream at a chosen moment, as a flaky network would.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Caller, SpindleStack

pytestmark = [pytest.mark.e2e]

NPM_DIR = Path(__file__).resolve().parent.parent / "npm"
SCRIPT = NPM_DIR / "stream_and_answer.mjs"


class StreamCuttingProxy:
    """Forwards loopback TCP to the gateway; can cut every live SSE connection."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.stream_requests: list[str] = []
        self.new_stream = asyncio.Event()
        self._stream_writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in self._stream_writers:
            writer.close()

    def cut_streams(self) -> None:
        for writer in self._stream_writers:
            writer.transport.abort()
        self._stream_writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        await asyncio.gather(
            self._requests(reader, up_writer, writer),
            self._pipe(up_reader, writer),
            return_exceptions=True,
        )

    async def _requests(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        client: asyncio.StreamWriter,
    ) -> None:
        """Client → gateway bytes; notes every SSE request, even on a kept-alive
        connection that served other requests first."""
        try:
            while data := await src.read(65536):
                for line in data.split(b"\r\n"):
                    if line.startswith(b"GET ") and b"/stream" in line:
                        self.stream_requests.append(line.decode(errors="replace"))
                        self._stream_writers.append(client)
                        self.new_stream.set()
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        finally:
            dst.close()


@pytest.fixture(scope="module")
def npm_client() -> Path:
    if shutil.which("node") is None or not (NPM_DIR / "node_modules/@vertesia/client").exists():
        pytest.fail("node and tests/npm/node_modules are required: run `npm ci` in tests/npm")
    return SCRIPT


@pytest.fixture
async def proxy(stack: SpindleStack) -> AsyncIterator[tuple[StreamCuttingProxy, str]]:
    settings = stack.settings
    cutter = StreamCuttingProxy(settings.gateway_host, settings.gateway_port)
    port = await cutter.start()
    yield cutter, f"http://127.0.0.1:{port}"
    await cutter.stop()


async def _next_line(proc: asyncio.subprocess.Process, timeout: float = 30) -> dict[str, Any]:
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), timeout)
    if not line:
        raise AssertionError("the npm client exited early")
    parsed: dict[str, Any] = json.loads(line)
    return parsed


async def test_npm_client_streams_survives_a_cut_and_answers(
    npm_client: Path,
    proxy: tuple[StreamCuttingProxy, str],
    http: httpx.AsyncClient,
    examples: list[str],
    callers: dict[str, Caller],
) -> None:
    cutter, base = proxy
    started = await http.post(
        "/runs", json={"graph": "approval-flow", "input": {"topic": "durable agents"}}
    )
    assert started.status_code == 201, started.text
    run = started.json()

    proc = await asyncio.create_subprocess_exec(
        "node",
        str(npm_client),
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "BASE_URL": base,
            "WORKFLOW_ID": run["workflow_id"],
            "RUN_ID": run["run_id"],
            "ANSWER": "approve",
            "WAIT_FOR_GO": "1",
            # The client sends it as a bearer token and as the stream's access_token.
            "TOKEN": callers["alice"].key,
        },
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=str(NPM_DIR),
    )
    assert proc.stdin is not None
    received: list[dict[str, Any]] = []
    try:
        # Until the run asks for input: history first, then the live stream.
        while True:
            line = await _next_line(proc)
            received.append(line["message"])
            if line["message"]["type"] == 9:  # REQUEST_INPUT
                break
        # Cut the live stream, wait for the client to reconnect by itself, then
        # let it answer: everything after the cut must arrive on the new stream.
        await asyncio.wait_for(cutter.new_stream.wait(), 30)
        cutter.new_stream.clear()
        cutter.cut_streams()
        await asyncio.wait_for(cutter.new_stream.wait(), 30)
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        signal_reply: dict[str, Any] | None = None
        while True:
            line = await _next_line(proc)
            if "message" in line:
                received.append(line["message"])
            elif "signal_response" in line:
                signal_reply = line["signal_response"]
            elif "signal_error" in line:
                raise AssertionError(line["signal_error"])
            elif line.get("done"):
                break
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()

    assert signal_reply is not None and signal_reply["status"] == "accepted"
    assert len(cutter.stream_requests) >= 2
    assert (
        "since=" in cutter.stream_requests[-1] and "skipHistory=true" in cutter.stream_requests[-1]
    )

    history = await http.get(f"/runs/{run['workflow_id']}/{run['run_id']}/updates")
    stored = history.json()["messages"]
    # Exactly the stored conversation, in order, each message once.
    assert [(m["timestamp"], m["type"]) for m in received] == [(m["ts"], m["t"]) for m in stored]
    types = [m["type"] for m in received]
    assert types[-1] == 4  # COMPLETE closes the conversation
    assert 8 in types and 7 in types  # the echoed QUESTION and the ANSWER
    assert all(m["workflow_run_id"] == run["run_id"] for m in received)
