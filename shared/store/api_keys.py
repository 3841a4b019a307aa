"""API keys: created and revoked by an operator, stored hashed in MongoDB.

A key reads ``spk_<key id>_<secret>``. Only the key id (public, shown in
listings) and the SHA-256 of the whole key are stored, so a leaked database
does not leak usable keys; the secret carries 256 random bits, which is why a
fast hash is the right one here (a slow password hash buys nothing against a
key nobody can guess, and would cost every request). Each key maps to one
tenant and one user, with roles.

Collection ``api_keys``: ``_id`` = key id; ``hash``, ``tenant_id``,
``user_id``, ``roles``, ``name``, ``created_at``, ``revoked`` (bool),
``revoked_at``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field
from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from spindle.shared.contracts.errors import NotFound, ValidationFailed
from spindle.shared.contracts.identity import Identity
from spindle.shared.platform.mongo import mongo_client
from spindle.shared.platform.settings import Settings

KEY_PREFIX = "spk_"
_KEY_PATTERN = re.compile(r"^spk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9._@:-]{1,128}$")


class ApiKeyInfo(BaseModel):
    """A stored key as listings show it (never the secret)."""

    key_id: str
    tenant_id: str
    user_id: str
    roles: list[str] = Field(default_factory=list)
    name: str | None = None
    created_at: datetime
    revoked: bool = False


class CreatedApiKey(BaseModel):
    """A new key: ``key`` is shown once and never stored."""

    key: str
    info: ApiKeyInfo


def looks_like_api_key(token: str) -> bool:
    return token.startswith(KEY_PREFIX)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _checked(value: str, field: str) -> str:
    if not _NAME_PATTERN.fullmatch(value):
        raise ValidationFailed(
            f"{field} must be 1-128 letters, digits or . _ @ : -",
            errors=[{"field": field, "rule": "pattern", "message": f"got {value!r}"}],
        )
    return value


class ApiKeyStore:
    """The ``api_keys`` collection."""

    def __init__(self, client: AsyncMongoClient[dict[str, Any]], db_name: str) -> None:
        self._client = client
        self.keys: AsyncCollection[dict[str, Any]] = client[db_name]["api_keys"]

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiKeyStore:
        return cls(mongo_client(settings, appname="spindle-auth"), settings.mongo_db)

    async def close(self) -> None:
        await self._client.close()

    async def create(
        self,
        *,
        tenant_id: str,
        user_id: str,
        roles: list[str] | None = None,
        name: str | None = None,
    ) -> CreatedApiKey:
        """Mint a key for ``user_id`` of ``tenant_id``; the only time the key is seen."""
        info = ApiKeyInfo(
            key_id=secrets.token_hex(8),
            tenant_id=_checked(tenant_id, "tenant"),
            user_id=_checked(user_id, "user"),
            roles=[_checked(role, "role") for role in roles or []],
            name=name,
            created_at=datetime.now(UTC),
        )
        key = f"{KEY_PREFIX}{info.key_id}_{secrets.token_urlsafe(32)}"
        await self.keys.insert_one(
            {"_id": info.key_id, "hash": key_hash(key), **info.model_dump(exclude={"key_id"})}
        )
        return CreatedApiKey(key=key, info=info)

    async def verify(self, key: str) -> Identity | None:
        """The identity of a valid, unrevoked key; None otherwise."""
        match = _KEY_PATTERN.fullmatch(key)
        if match is None:
            return None
        doc = await self.keys.find_one({"_id": match.group(1)})
        if doc is None or doc.get("revoked"):
            return None
        if not hmac.compare_digest(str(doc.get("hash", "")), key_hash(key)):
            return None
        return Identity(
            tenant_id=doc["tenant_id"],
            user_id=doc["user_id"],
            roles=tuple(doc.get("roles") or ()),
            method="api_key",
            key_id=match.group(1),
        )

    async def is_active(self, key_id: str, *, tenant_id: str, user_id: str) -> bool:
        """Whether key ``key_id`` of that tenant and user exists and is not revoked.

        A stream token minted with a key lives only as long as the key does.
        """
        doc = await self.keys.find_one(
            {"_id": key_id, "tenant_id": tenant_id, "user_id": user_id}, {"revoked": 1}
        )
        return doc is not None and not doc.get("revoked")

    async def revoke(self, key_id: str, *, tenant_id: str | None = None) -> ApiKeyInfo:
        """Revoke a key by its id (idempotent).

        Args:
            key_id: the key's id.
            tenant_id: only a key of this tenant (another tenant's key is not found).

        Raises:
            NotFound: no key has that id (in that tenant).
        """
        query: dict[str, Any] = {"_id": key_id}
        if tenant_id is not None:
            query["tenant_id"] = tenant_id
        result = await self.keys.update_one(
            query, {"$set": {"revoked": True}, "$currentDate": {"revoked_at": True}}
        )
        if result.matched_count == 0:
            raise NotFound(f"API key '{key_id}' was not found")
        doc = await self.keys.find_one({"_id": key_id})
        assert doc is not None
        return _info(doc)

    async def list(self, *, tenant_id: str | None = None) -> list[ApiKeyInfo]:
        query: dict[str, Any] = {} if tenant_id is None else {"tenant_id": tenant_id}
        return [_info(doc) async for doc in self.keys.find(query).sort("_id", 1)]


def _info(doc: dict[str, Any]) -> ApiKeyInfo:
    return ApiKeyInfo(key_id=doc["_id"], **{k: v for k, v in doc.items() if k in _INFO_FIELDS})


_INFO_FIELDS = {"tenant_id", "user_id", "roles", "name", "created_at", "revoked"}
