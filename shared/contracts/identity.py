"""Who is calling: the identity every authenticated request acts as.

An API key, a bearer JWT or a stream token resolves to one ``Identity``: a
tenant, a user in it and the user's roles. Every run, message, file and graph
belongs to a tenant; the gateway hands the identity to whatever it touches so
that nothing reaches another tenant's data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

AuthMethod = Literal["api_key", "jwt", "stream_token", "disabled"]

# The tenant and user every request acts as when auth is switched off.
DEV_TENANT = "default"
DEV_USER = "dev"


class Identity(BaseModel):
    """An authenticated caller.

    Attributes:
        tenant_id: the tenant whose data the caller may see.
        user_id: the caller within the tenant (owner of the runs it starts).
        roles: roles granted to the caller (``Settings.run_control_roles`` lets
            some of them control every run of the tenant).
        method: how the caller proved who it is.
        key_id: the API key's public id, when ``method`` is ``api_key``.
        run_scope: a stream token's run (workflow id): the only run it may read.
        expires_at: when the credential expires (epoch seconds), if it does: a
            stream token minted from it expires no later.
    """

    model_config = ConfigDict(frozen=True)

    tenant_id: str = Field(min_length=1, max_length=128)
    user_id: str = Field(min_length=1, max_length=256)
    roles: tuple[str, ...] = ()
    method: AuthMethod
    key_id: str | None = None
    run_scope: str | None = None
    expires_at: int | None = None

    def has_any_role(self, roles: list[str] | tuple[str, ...]) -> bool:
        return any(role in self.roles for role in roles)


DEV_IDENTITY = Identity(tenant_id=DEV_TENANT, user_id=DEV_USER, roles=("admin",), method="disabled")
