"""API keys of the caller's tenant: create, list, revoke (``/keys``, ``spindle keys``).

Only a caller with a role in ``key_admin_roles`` may touch keys, and only its own
tenant's: a key of another tenant answers as an unknown one (404), and a request
naming another tenant is refused (403). Minting the very first admin key of a
tenant (or of a stack no gateway fronts yet) is ``spindle keys create --direct``,
which writes to MongoDB (docs/operations/cli.md).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from spindle.gateway.services.callers import Caller
from spindle.shared.contracts.errors import Forbidden, Unavailable
from spindle.shared.store.api_keys import ApiKeyInfo, ApiKeyStore, CreatedApiKey


class KeyCreate(BaseModel):
    """``POST /keys``: a key for a user of the caller's tenant."""

    user: str = Field(description="the user the key acts as")
    roles: list[str] = Field(default_factory=list, description="the roles the key grants")
    name: str | None = Field(None, max_length=200, description="a note to recognise it by")
    tenant: str | None = Field(
        None, description="the caller's own tenant (any other is refused); default: it"
    )


class KeyList(BaseModel):
    """``GET /keys``: the tenant's keys, never their secrets."""

    keys: list[ApiKeyInfo]


def _admin_store(caller: Caller, tenant: str | None = None) -> ApiKeyStore:
    """The key store, once the caller may administer its tenant's keys.

    Raises:
        Forbidden: no role in ``key_admin_roles``, or ``tenant`` is another tenant.
        Unavailable: this gateway keeps no key store.
    """
    settings = caller.state.settings
    roles = settings.key_admin_roles
    if caller.identity.method != "disabled" and not caller.identity.has_any_role(roles):
        raise Forbidden(
            f"managing API keys needs role {' or '.join(roles) or '(none configured)'} "
            "(key_admin_roles)"
        )
    if tenant is not None and tenant != caller.tenant_id:
        raise Forbidden(
            f"the keys of tenant '{tenant}' are not yours to manage: a gateway caller manages "
            "its own tenant's keys only (an operator uses spindle keys --direct)"
        )
    if caller.state.keys is None:
        raise Unavailable("this gateway keeps no API key store")
    return caller.state.keys


async def create_key(caller: Caller, body: KeyCreate) -> CreatedApiKey:
    """Mint a key for ``body.user`` of the caller's tenant (the key is shown once)."""
    store = _admin_store(caller, body.tenant)
    return await store.create(
        tenant_id=caller.tenant_id, user_id=body.user, roles=body.roles, name=body.name
    )


async def list_keys(caller: Caller, tenant: str | None = None) -> KeyList:
    """The caller's tenant's keys."""
    store = _admin_store(caller, tenant)
    return KeyList(keys=await store.list(tenant_id=caller.tenant_id))


async def revoke_key(caller: Caller, key_id: str) -> ApiKeyInfo:
    """Revoke a key of the caller's tenant.

    Raises:
        NotFound: no key of that id in the caller's tenant.
    """
    store = _admin_store(caller)
    return await store.revoke(key_id, tenant_id=caller.tenant_id)
