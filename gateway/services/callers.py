"""Who asks: one typed caller for every door and every service operation.

A ``Caller`` is the authenticated identity (tenant, user, roles), the gateway's
state (its clients and the tenant limits) and the base URL the caller's links
use. REST builds it in ``spindle.gateway.api.deps``; JSON-RPC, A2A, AG-UI and
MCP build it from their request with ``caller_for``.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import HTTPConnection

from spindle.gateway.limits.tenant_limits import TenantLimits
from spindle.gateway.services.state import GatewayState, gateway_state
from spindle.shared.contracts.identity import Identity


@dataclass(frozen=True)
class Caller:
    """The caller of an operation and what it is served with.

    Attributes:
        identity: the authenticated caller; every run it touches is its tenant's.
        state: the gateway's clients (``GatewayState``).
        base_url: the address the caller's links (stream, status) point at.
    """

    identity: Identity
    state: GatewayState
    base_url: str

    @property
    def tenant_id(self) -> str:
        return self.identity.tenant_id

    @property
    def user_id(self) -> str:
        return self.identity.user_id

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(self.identity.roles)

    @property
    def limits(self) -> TenantLimits:
        """The per-tenant rate limits and stream slots the caller is counted against."""
        return self.state.limits


def public_base_url(connection: HTTPConnection) -> str:
    """The address clients should use for links (``public_url`` wins)."""
    settings = gateway_state(connection).settings
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return str(connection.base_url).rstrip("/")


def caller_for(connection: HTTPConnection, identity: Identity) -> Caller:
    """The caller ``identity`` of the request ``connection``."""
    return Caller(identity, gateway_state(connection), public_base_url(connection))
