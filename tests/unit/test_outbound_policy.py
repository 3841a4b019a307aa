"""The outbound URL policy (issue 15, M1): every spelling of a refused address, the
allow-list, headers, and the guarded client against a real loopback receiver."""

from __future__ import annotations

import asyncio
import contextlib
import io
import ipaddress
import logging
import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from spindle.shared.contracts.errors import OutboundRefused
from spindle.shared.platform.logging_setup import configure_logging
from spindle.shared.platform.outbound import (
    OutboundPolicy,
    guarded_client,
    loggable_url,
    refusal_reason,
)
from spindle.shared.platform.settings import Settings
from tests.callback_receiver import callback_receiver

DEFAULT = OutboundPolicy()

REFUSED = [
    "http://127.0.0.1:6379/",
    "http://localhost:7243/",
    "http://LOCALHOST./hook",
    "http://api.localhost/hook",
    "http://[::1]/",
    "http://127.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0177.0.0.1/",
    "http://127.0.0.1./",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[2002:7f00:1::]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[fd00:ec2::254]/",
    "http://10.0.0.5/",
    "http://172.16.3.4/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",
    "http://0.0.0.0/",
    "http://[::]/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://user:pw@example.com/hook",
    "http://token@example.com/hook",
    "ftp://example.com/",
    "http:///nohost",
]


@pytest.mark.parametrize("url", REFUSED)
def test_the_default_policy_refuses_every_spelling(url: str) -> None:
    with pytest.raises(OutboundRefused) as caught:
        DEFAULT.check_url(url)
    assert caught.value.errors[0]["field"] == "url"
    assert "pw" not in caught.value.detail, "the error shows no credentials"


@pytest.mark.parametrize(
    "url", ["https://example.com/hook", "http://93.184.216.34:8080/x", "http://[2606:4700::1]/"]
)
def test_public_addresses_pass(url: str) -> None:
    DEFAULT.check_url(url)


def test_the_reason_names_the_kind_of_address() -> None:
    with pytest.raises(OutboundRefused, match="cloud metadata"):
        DEFAULT.check_url("http://169.254.169.254/")
    with pytest.raises(OutboundRefused, match="loopback"):
        DEFAULT.check_url("http://0x7f000001:6379/")
    with pytest.raises(OutboundRefused, match="credentials"):
        DEFAULT.check_url("https://user:secret@example.com/")


def test_the_allow_list_lets_hosts_and_networks_through() -> None:
    policy = OutboundPolicy.parse("127.0.0.0/8, ::1/128, hooks.internal")
    policy.check_url("http://127.1:9000/")
    policy.check_url("http://[::1]/")
    policy.check_url("http://[::ffff:127.0.0.1]/")
    policy.check_url("http://hooks.internal./x")
    with pytest.raises(OutboundRefused):
        policy.check_url("http://10.1.2.3/")
    with pytest.raises(ValueError, match="outbound_allow"):
        OutboundPolicy.parse("not a/host")


async def test_a_name_is_checked_after_dns_on_every_address() -> None:
    # The machine's own name resolves (via /etc/hosts) to a loopback or
    # private address: the static check cannot see it, resolution must.
    name = socket.gethostname()
    addresses = {info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}
    if not any(refusal_reason(ipaddress.ip_address(a)) for a in addresses):
        pytest.skip(f"{name} resolves to public addresses here: {addresses}")
    DEFAULT.check_url(f"http://{name}/")
    with pytest.raises(OutboundRefused, match="address"):
        await DEFAULT.resolve(f"http://{name}/")


def test_callers_cannot_set_host_or_hop_by_hop_headers() -> None:
    with pytest.raises(OutboundRefused, match="Host"):
        DEFAULT.check_headers({"Host": "redis", "X-Fine": "1"})
    with pytest.raises(OutboundRefused, match="Transfer-Encoding"):
        DEFAULT.check_headers({"Transfer-Encoding": "chunked"})
    DEFAULT.check_headers({"Authorization": "Bearer x", "X-Trace": "1"})


def test_logged_urls_carry_no_credentials_or_query() -> None:
    shown = loggable_url("https://bob:hunter2@hooks.example.com:8443/p?token=abc")
    assert shown == "https://hooks.example.com:8443/p?…"


async def test_the_guarded_client_refuses_loopback_on_the_connection() -> None:
    async with callback_receiver(lambda n: 200) as receiver:
        async with guarded_client(DEFAULT, timeout=2) as client:
            for host in ("127.0.0.1", "127.1", "localhost"):
                with pytest.raises(OutboundRefused):
                    await client.post(f"http://{host}:{receiver.port}/hook", json={})
        assert receiver.statuses == [], "nothing reached the receiver"


async def test_the_guarded_client_sends_the_name_as_host_and_drops_caller_host() -> None:
    policy = OutboundPolicy.parse("localhost")
    async with callback_receiver(lambda n: 200) as receiver:
        async with guarded_client(policy, timeout=2) as client:
            reply = await client.post(
                f"http://localhost:{receiver.port}/hook",
                json={"a": 1},
                headers={"Host": "evil.example", "Connection": "upgrade"},
            )
        assert reply.status_code == 200
    assert receiver.headers[0]["host"] == f"localhost:{receiver.port}"
    assert receiver.headers[0].get("connection") != "upgrade"


@contextlib.asynccontextmanager
async def redirecting_server(location: str) -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 307 X\r\nLocation: " + location.encode() + b"\r\nContent-Length: 0\r\n\r\n"
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_redirects_are_not_followed() -> None:
    policy = OutboundPolicy.parse("127.0.0.1/32")
    async with callback_receiver(lambda n: 200) as inner:
        async with (
            redirecting_server(f"http://127.0.0.1:{inner.port}/hook") as port,
            guarded_client(policy, timeout=2) as client,
        ):
            reply = await client.post(f"http://127.0.0.1:{port}/", json={})
        assert reply.status_code == 307
        assert inner.statuses == []
    assert isinstance(reply, httpx.Response)


def test_httpx_request_lines_are_not_logged_at_info() -> None:
    # httpx logs each request's full URL (a push URL's token included) at INFO.
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logging.getLogger("httpx").level)
    try:
        configure_logging(Settings(log_level="INFO"), stream=io.StringIO())
        assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)
        assert logging.getLogger("spindle").isEnabledFor(logging.INFO)
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])
        logging.getLogger("httpx").setLevel(saved[2])


async def test_registration_accepts_a_name_that_does_not_resolve_yet() -> None:
    # Delivery resolves and checks again; registration refuses only what it can see.
    url = "https://hooks.invalid/push"
    await DEFAULT.check_registration(url)
    with pytest.raises(OutboundRefused, match="does not resolve"):
        await DEFAULT.resolve(url)
    with pytest.raises(OutboundRefused, match="loopback"):
        await DEFAULT.check_registration("http://0x7f000001/")


def test_a_malformed_allow_list_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="outbound_allow"):
        Settings(outbound_allow="10.0.0.0/8, not a/host")
