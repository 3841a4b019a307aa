"""``guarded_client`` for ``httpx2``: the outbound URL policy for MCP HTTP servers.

The official ``mcp`` SDK's streamable-HTTP client takes an ``httpx2.AsyncClient``
(a fork of ``httpx`` with the same transport interface), not an ``httpx`` one. Only
the transport's base class differs: the guard itself is
``spindle.shared.platform.outbound.guard_request``, the one ``GuardedTransport``
uses (every request resolves its host once, checks every address and connects to
the checked address while TLS SNI and ``Host`` keep the name); the client follows
no redirects and ignores proxies from the environment.
"""

from __future__ import annotations

import httpx2

from spindle.shared.platform.outbound import OutboundPolicy, guard_request


class GuardedTransport2(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that connects only where ``policy`` allows."""

    def __init__(
        self, policy: OutboundPolicy, inner: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.policy = policy
        self._inner = inner or httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        await guard_request(self.policy, request)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client2(
    policy: OutboundPolicy, *, timeout: float, headers: dict[str, str] | None = None
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for a caller-chosen URL (see the module docs)."""
    transport = GuardedTransport2(policy, httpx2.AsyncHTTPTransport(trust_env=False))
    return httpx2.AsyncClient(
        transport=transport,
        follow_redirects=False,
        timeout=timeout,
        trust_env=False,
        headers=headers,
    )
