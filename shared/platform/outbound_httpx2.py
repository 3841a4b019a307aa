"""``guarded_client`` for ``httpx2``: the outbound URL policy for MCP HTTP servers.

The official ``mcp`` SDK's streamable-HTTP client takes an ``httpx2.AsyncClient``
(a fork of ``httpx`` with the same transport interface), not an ``httpx`` one. This
is the same guard as ``spindle.shared.platform.outbound.GuardedTransport``: every
request resolves its host once, checks every address against the policy and
connects to the checked address while TLS SNI and ``Host`` keep the name; no
redirects, no proxies from the environment, no caller-set hop-by-hop headers.
"""

from __future__ import annotations

import httpx2

from spindle.shared.platform.outbound import FORBIDDEN_HEADERS, OutboundPolicy


class GuardedTransport2(httpx2.AsyncBaseTransport):
    """An ``httpx2`` transport that connects only where ``policy`` allows."""

    def __init__(
        self, policy: OutboundPolicy, inner: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.policy = policy
        self._inner = inner or httpx2.AsyncHTTPTransport(trust_env=False)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        target = await self.policy.resolve(str(request.url))
        host_header = request.url.netloc.decode("ascii").rpartition("@")[2]
        for name in list(request.headers):
            if name.lower() in FORBIDDEN_HEADERS - {"content-length", "transfer-encoding"}:
                del request.headers[name]
        request.headers["Host"] = host_header
        request.url = request.url.copy_with(host=target.address)
        request.extensions = {**request.extensions, "sni_hostname": target.host}
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
