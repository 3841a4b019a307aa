"""The one policy for every URL Spindle calls on a caller's behalf.

Push notifications, run webhooks and MCP streamable-HTTP servers all use it.

A caller who registers a URL chooses where a Spindle process connects from
inside the deployment's network, so an unchecked URL lets them reach Redis,
Temporal, MongoDB or a cloud metadata service (server-side request forgery).
Every outbound call made for a caller therefore goes through this module:

- ``OutboundPolicy.check_url`` refuses what can be judged from the URL alone
  (scheme, userinfo, literal addresses in any spelling, ``localhost`` names) —
  the gateway calls it, and ``OutboundPolicy.resolve``, when a URL is
  registered, so a bad URL is refused with a clear error right away;
- ``guarded_client`` is an ``httpx.AsyncClient`` whose transport resolves the
  host once per request, checks EVERY resolved address and connects to the
  checked address while TLS SNI and ``Host`` still carry the name (so DNS
  rebinding between check and connect is impossible), never follows redirects,
  ignores proxy environment variables and drops caller-set ``Host`` and
  hop-by-hop headers.

Refused by default: loopback, private (RFC 1918, unique local), carrier-grade
NAT, link-local (which holds the cloud metadata address 169.254.169.254),
multicast, unspecified, reserved and any other non-global address, also when
embedded in IPv6 (IPv4-mapped, IPv4-compatible, 6to4, NAT64). The
``outbound_allow`` setting lists host names and CIDRs that are let through
anyway (``spindle dev`` allows loopback). docs/protocols/outbound.md describes the policy.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from spindle.shared.contracts.errors import OutboundRefused
from spindle.shared.platform.destinations import normalize_host

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: Headers a caller may not set on an outbound request: the connection is ours.
FORBIDDEN_HEADERS = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)

RESOLVE_TIMEOUT_SECONDS = 5.0
METADATA_ADDRESSES = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def loggable_url(url: str) -> str:
    """``url`` without userinfo and query string: what logs and error messages may show."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host, query="…" if parts.query else "", fragment=""))


def _literal_address(host: str) -> IPAddress | None:
    """The address a host names literally, in any spelling ``getaddrinfo`` accepts."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        pass
    # The BSD forms (127.1, 2130706433, 0x7f000001, 0177.0.0.1) name IPv4 addresses too.
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host) and host[0].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            return None
    return None


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    value = int(address)
    if address in _NAT64 or (1 < value < 2**32):
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why the default policy refuses ``address``, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            inner = refusal_reason(embedded)
            return f"{inner} (embedded in {address})" if inner else None
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    for kind, flag in (
        ("an unspecified", address.is_unspecified),
        ("a loopback", address.is_loopback),
        ("a link-local", address.is_link_local),
        ("a multicast", address.is_multicast),
        ("a private", address.is_private),
        ("a reserved", address.is_reserved),
    ):
        if flag:
            return f"{kind} address"
    if not address.is_global:
        return "not a globally routable address"
    return None


@dataclass(frozen=True)
class Target:
    """A checked destination: the name to present and the address to connect to."""

    host: str
    port: int
    address: str


@dataclass(frozen=True)
class OutboundPolicy:
    """Which destinations outbound calls may reach.

    Attributes:
        allowed_hosts: host names let through whatever they resolve to
            (lower case, no trailing dot).
        allowed_networks: addresses let through although the default refuses them.
    """

    allowed_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def parse(cls, allow: str | Iterable[str]) -> OutboundPolicy:
        """A policy from ``outbound_allow`` (comma-separated host names and CIDRs).

        Raises:
            ValueError: an entry is empty-looking garbage (neither a name nor a CIDR).
        """
        entries = allow.split(",") if isinstance(allow, str) else list(allow)
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError as exc:
                if any(c in entry for c in "/:@ "):
                    raise ValueError(
                        f"outbound_allow: {entry!r} is neither a host nor a CIDR"
                    ) from exc
                hosts.add(entry.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def _allowed(self, address: IPAddress) -> bool:
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        if mapped is not None and self._allowed(mapped):
            return True
        return any(address in network for network in self.allowed_networks)

    def check_address(self, url: str, address: IPAddress) -> None:
        """Raises ``OutboundRefused`` unless ``address`` is public or allowed."""
        if self._allowed(address):
            return
        reason = refusal_reason(address)
        if reason is not None:
            raise _refused(url, f"{address} is {reason}")

    def check_url(self, url: str) -> tuple[str, int]:
        """What can be judged without DNS; returns (host without trailing dot, port).

        Raises:
            OutboundRefused: not an absolute http(s) URL, userinfo present, or the
                host is a refused address (in any spelling) or a loopback name.
        """
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise _refused(url, f"not a valid URL ({exc})") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise _refused(url, "must be an absolute http or https URL")
        if "@" in parts.netloc:
            raise _refused(url, "must not carry credentials (user:password@); use headers")
        # Every spelling of a name DNS reads the same is judged the same (IDNA dots).
        host = normalize_host(parts.hostname)
        if port is None:
            port = 443 if parts.scheme == "https" else 80
        if host in self.allowed_hosts:
            return host, port
        literal = _literal_address(host)
        if literal is not None:
            self.check_address(url, literal)
        elif host in _LOOPBACK_NAMES or host.endswith(".localhost"):
            self.check_address(url, ipaddress.ip_address("127.0.0.1"))
        return host, port

    async def resolve(self, url: str) -> Target:
        """Check ``url``, resolve its host once and check every address it resolves to.

        Raises:
            OutboundRefused: the URL or any resolved address is refused, or the
                name does not resolve.
        """
        host, port = self.check_url(url)
        literal = _literal_address(host)
        if literal is not None:
            return Target(host, port, str(literal))
        try:
            addresses = await _addresses(host, port)
        except (OSError, TimeoutError) as exc:
            raise _refused(url, f"host {host!r} does not resolve ({exc})") from exc
        self._check_all(url, host, addresses)
        return Target(host, port, str(addresses[0]))

    async def check_registration(self, url: str) -> None:
        """What can be checked when a URL is registered: ``check_url``, then every
        address the host resolves to now. A name that does not resolve yet is
        accepted: each delivery resolves and checks again.

        Raises:
            OutboundRefused: the URL, or an address it resolves to, is refused.
        """
        host, port = self.check_url(url)
        if _literal_address(host) is not None:
            return
        try:
            addresses = await _addresses(host, port)
        except (OSError, TimeoutError):
            return
        self._check_all(url, host, addresses)

    def _check_all(self, url: str, host: str, addresses: list[IPAddress]) -> None:
        if host in self.allowed_hosts:
            return
        for address in addresses:
            self.check_address(url, address)

    @staticmethod
    def check_headers(headers: Mapping[str, str], *, field: str = "headers") -> None:
        """Raises ``OutboundRefused`` when a caller sets ``Host`` or a hop-by-hop header."""
        bad = sorted(name for name in headers if name.strip().lower() in FORBIDDEN_HEADERS)
        if bad:
            raise OutboundRefused(
                f"{field}: {', '.join(bad)} may not be set (the connection's own headers)",
                errors=[{"field": field, "reason": f"forbidden header(s): {', '.join(bad)}"}],
            )


async def _addresses(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (at least one).

    Raises:
        OSError, TimeoutError: the name does not resolve (in time).
    """
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(RESOLVE_TIMEOUT_SECONDS):
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not addresses:
        raise OSError(f"{host!r} resolves to no address")
    return addresses


def _refused(url: str, reason: str) -> OutboundRefused:
    shown = loggable_url(url)
    return OutboundRefused(
        f"outbound URL '{shown}' refused: {reason} (see the outbound_allow setting)",
        errors=[{"field": "url", "reason": reason}],
    )


@lru_cache(maxsize=8)
def _parsed(allow: str) -> OutboundPolicy:
    return OutboundPolicy.parse(allow)


class _AllowSetting(Protocol):
    @property
    def outbound_allow(self) -> str: ...


def outbound_policy(settings: _AllowSetting) -> OutboundPolicy:
    """The policy of ``settings.outbound_allow`` (a ``Settings``)."""
    return _parsed(settings.outbound_allow)


class GuardableRequest(Protocol):
    """What ``guard_request`` needs of a request: ``httpx.Request`` and its fork
    ``httpx2.Request`` (the MCP SDK's) both have it."""

    url: Any
    headers: Any
    extensions: Any


async def guard_request(policy: OutboundPolicy, request: GuardableRequest) -> None:
    """Point ``request`` at a checked address of its host, in place.

    The host is resolved once and every address checked (``OutboundPolicy.resolve``);
    the request then connects to the checked address while ``Host`` and TLS SNI
    keep the name, so a DNS answer that changes after the check is never used.
    Caller-set ``Host`` and hop-by-hop headers are dropped.

    Raises:
        OutboundRefused: the URL or an address its host resolves to is refused.
    """
    target = await policy.resolve(str(request.url))
    host_header = request.url.netloc.decode("ascii").rpartition("@")[2]
    for name in list(request.headers):
        if name.lower() in FORBIDDEN_HEADERS - {"content-length", "transfer-encoding"}:
            del request.headers[name]
    request.headers["Host"] = host_header
    request.url = request.url.copy_with(host=target.address)
    request.extensions = {**request.extensions, "sni_hostname": target.host}


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that connects only where ``policy`` allows (see the module docs).

    Args:
        policy: the outbound policy.
        inner: the transport that sends the rewritten request (default: a plain
            ``httpx.AsyncHTTPTransport`` without proxies from the environment).
    """

    def __init__(
        self, policy: OutboundPolicy, inner: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.policy = policy
        self._inner = inner or httpx.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await guard_request(self.policy, request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(
    policy: OutboundPolicy, *, timeout: float, max_connections: int = 100
) -> httpx.AsyncClient:
    """An ``httpx.AsyncClient`` for caller-chosen URLs: the policy on every request,
    no redirects, no proxies from the environment."""
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=20)
    transport = GuardedTransport(policy, httpx.AsyncHTTPTransport(trust_env=False, limits=limits))
    return httpx.AsyncClient(
        transport=transport, follow_redirects=False, timeout=timeout, trust_env=False
    )
