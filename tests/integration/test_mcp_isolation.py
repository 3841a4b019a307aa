"""MCP HTTP servers get the delivery isolation of push notifications.

Each tenant's graph names its own MCP servers; the worker's ``McpToolCache``
calls them through the outbound policy and a per-destination gate
(``shared.platform.destinations``). Real MCP servers (``tests/mcp_echo_server.py``
over streamable HTTP, the official SDK on both sides) and plain TCP listeners
that hang or hang up stand in for a tenant's broken server.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from spindle.dev.processes import free_port
from spindle.shared.contracts.errors import ToolError
from spindle.shared.graphs.node_params import McpServer
from spindle.shared.platform.settings import Settings
from spindle.worker.tools.mcp_client import McpToolCache
from tests.polling import eventually

pytestmark = pytest.mark.integration

SERVER = Path(__file__).resolve().parents[1] / "mcp_echo_server.py"
LOOPBACK = "127.0.0.1/32"


@contextlib.asynccontextmanager
async def echo_server(port: int) -> AsyncIterator[str]:
    """The echo MCP server over streamable HTTP on 127.0.0.1:``port``; yields its URL."""
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def up() -> bool:
        try:
            httpx.get(url, timeout=1)
        except httpx.HTTPError:
            return False
        return True

    try:
        await eventually(up, what="the MCP server listening", timeout=30)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@contextlib.asynccontextmanager
async def broken_server(*, hang: bool) -> AsyncIterator[tuple[int, list[int]]]:
    """A TCP listener on loopback that never answers (``hang``) or hangs up at once.

    Yields its port and the list of connections it accepted (one entry each).
    """
    accepted: list[int] = []
    held: list[asyncio.StreamWriter] = []

    async def on_connect(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        if hang:
            held.append(writer)
        else:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port, accepted
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


def http(name: str, url: str) -> McpServer:
    return McpServer.model_validate({"name": name, "url": url})


async def shout(cache: McpToolCache, server: McpServer, text: str) -> object:
    return await cache.call([server], f"{server.name}__shout", {"text": text})


async def test_a_hanging_server_holds_only_its_own_calls() -> None:
    cache = McpToolCache(
        Settings(outbound_allow=LOOPBACK, mcp_per_destination=1, mcp_timeout_seconds=60)
    )
    async with broken_server(hang=True) as (port, accepted), echo_server(free_port()) as url:
        tenant_a = http("slow", f"http://127.0.0.1:{port}/mcp")
        stuck = asyncio.create_task(shout(cache, tenant_a, "a"))
        # Another of A's servers on the same host and port (its own tool list).
        queued = asyncio.create_task(shout(cache, http("slow2", f"http://127.0.0.1:{port}/b"), "a"))
        await eventually(lambda: accepted == [1], what="tenant A's call connected")

        # Tenant B's server answers while both of tenant A's calls are still waiting:
        # the one slot of A's destination is taken, B's destination has its own.
        assert await shout(cache, http("echo", url), "tenant b") == {"result": "TENANT B"}
        assert not stuck.done() and not queued.done()
        assert accepted == [1]  # A's second call waits for A's slot, it never connected
        assert cache.gate.in_flight(f"127.0.0.1:{port}") == 1

        stuck.cancel()
        queued.cancel()
        await asyncio.gather(stuck, queued, return_exceptions=True)
    assert cache.gate.in_flight(f"127.0.0.1:{port}") == 0


async def test_the_breaker_opens_after_failures_and_recovers() -> None:
    cache = McpToolCache(
        Settings(outbound_allow=LOOPBACK, mcp_breaker_failures=2, mcp_breaker_seconds=1)
    )
    async with broken_server(hang=False) as (port, accepted):
        failing = http("flaky", f"http://127.0.0.1:{port}/mcp")
        for _ in range(2):
            with pytest.raises(ToolError) as failed:
                await shout(cache, failing, "x")
            assert "MCP server 'flaky' failed" in str(failed.value)
        connections = len(accepted)
        with pytest.raises(ToolError) as held:
            await shout(cache, failing, "x")
        assert "circuit breaker" in str(held.value) and f"127.0.0.1:{port}" in str(held.value)
        assert len(accepted) == connections  # refused without connecting

    # The server comes back on the same address: once the breaker's time is
    # up, the next call goes through and closes it.
    async with echo_server(port):

        async def answered() -> bool:
            try:
                return await shout(cache, failing, "back") == {"result": "BACK"}
            except ToolError as exc:
                assert "circuit breaker" in str(exc)
                return False

        await eventually(answered, what="the breaker let a call through", timeout=30)
        assert cache.gate.open_until(f"127.0.0.1:{port}") is None


async def test_a_name_resolving_outside_the_policy_is_refused_at_the_connection() -> None:
    # The host name passes the URL check but resolves to a loopback or private
    # address: the guarded transport refuses it after resolving, before connecting.
    host = socket.gethostname()
    cache = McpToolCache(Settings(mcp_breaker_failures=1))
    async with broken_server(hang=False) as (port, accepted):
        server = http("inside", f"http://{host}:{port}/mcp")
        for _ in range(2):
            with pytest.raises(ToolError) as refused:
                await shout(cache, server, "x")
            message = str(refused.value)
            assert "MCP server 'inside'" in message and "refused" in message
            assert "outbound_allow" in message and "circuit breaker" not in message
    assert accepted == []
