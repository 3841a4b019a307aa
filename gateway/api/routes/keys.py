"""API keys of the caller's tenant: ``POST /keys``, ``GET /keys``, ``DELETE /keys/{key_id}``.

Role-checked (``key_admin_roles``) in ``spindle.gateway.services.api_keys``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, status

from spindle.gateway.api.deps import CallerDep
from spindle.gateway.services.api_keys import (
    KeyCreate,
    KeyList,
    create_key,
    list_keys,
    revoke_key,
)
from spindle.shared.store.api_keys import ApiKeyInfo, CreatedApiKey

router = APIRouter(tags=["keys"])

_REFUSED: dict[int | str, dict[str, Any]] = {
    403: {"description": "no role in key_admin_roles, or another tenant (problem+json)"},
}


@router.post(
    "/keys",
    response_model=CreatedApiKey,
    status_code=status.HTTP_201_CREATED,
    summary="Mint an API key for a user of the caller's tenant (shown once)",
    responses={**_REFUSED, 422: {"description": "a bad user, role or name (problem+json)"}},
)
async def post_key(body: KeyCreate, caller: CallerDep) -> CreatedApiKey:
    return await create_key(caller, body)


@router.get(
    "/keys",
    response_model=KeyList,
    summary="The caller's tenant's API keys (ids, never secrets)",
    responses=_REFUSED,
)
async def get_keys(
    caller: CallerDep,
    tenant: Annotated[str | None, Query(description="the caller's own tenant")] = None,
) -> KeyList:
    return await list_keys(caller, tenant)


@router.delete(
    "/keys/{key_id}",
    response_model=ApiKeyInfo,
    summary="Revoke an API key of the caller's tenant",
    responses={**_REFUSED, 404: {"description": "no such key in the tenant (problem+json)"}},
)
async def delete_key(key_id: str, caller: CallerDep) -> ApiKeyInfo:
    return await revoke_key(caller, key_id)
