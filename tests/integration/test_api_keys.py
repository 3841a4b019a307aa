"""API keys: minted and revoked with ``spindle keys``, stored hashed, verified
against the session's real MongoDB wire server."""

from __future__ import annotations

import hashlib
import subprocess
import uuid
from collections.abc import AsyncIterator

import pytest
from starlette.requests import Request

from spindle.gateway.auth import authenticator as authenticator_module
from spindle.gateway.auth.authenticator import Authenticator
from spindle.shared.contracts.errors import NotFound, Unauthorized, ValidationFailed
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.cli_runner import run_spindle

pytestmark = pytest.mark.integration


@pytest.fixture
def db() -> str:
    return f"keys_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def store(settings: Settings, db: str) -> AsyncIterator[ApiKeyStore]:
    keys = ApiKeyStore.from_settings(settings.model_copy(update={"mongo_db": db}))
    yield keys
    await keys.close()


def spindle(*args: str, settings: Settings, db: str) -> subprocess.CompletedProcess[str]:
    return run_spindle("keys", *args, SPINDLE_MONGO_URL=settings.mongo_url, SPINDLE_MONGO_DB=db)


async def test_a_key_verifies_to_its_tenant_user_and_roles(store: ApiKeyStore) -> None:
    created = await store.create(tenant_id="acme", user_id="alice", roles=["admin"], name="ci")
    identity = await store.verify(created.key)
    assert identity is not None
    assert (identity.tenant_id, identity.user_id, identity.roles) == ("acme", "alice", ("admin",))
    assert identity.key_id == created.info.key_id


async def test_only_the_hash_is_stored(store: ApiKeyStore) -> None:
    created = await store.create(tenant_id="acme", user_id="alice")
    doc = await store.keys.find_one({"_id": created.info.key_id})
    assert doc is not None
    secret = created.key.rsplit("_", 1)[1]
    assert secret not in str(doc)
    assert doc["hash"] == hashlib.sha256(created.key.encode()).hexdigest()


async def test_wrong_revoked_and_malformed_keys_do_not_verify(store: ApiKeyStore) -> None:
    created = await store.create(tenant_id="acme", user_id="alice")
    tampered = created.key[:-1] + ("A" if created.key[-1] != "A" else "B")
    assert await store.verify(tampered) is None
    assert await store.verify("spk_nothing") is None
    assert await store.verify(f"spk_{'0' * 16}_{'a' * 43}") is None
    await store.revoke(created.info.key_id)
    assert await store.verify(created.key) is None
    with pytest.raises(NotFound):
        await store.revoke("0123456789abcdef")


async def test_tenant_and_user_names_are_checked(store: ApiKeyStore) -> None:
    with pytest.raises(ValidationFailed, match="tenant"):
        await store.create(tenant_id="acme/../other", user_id="alice")
    assert await store.list() == []


async def test_cli_creates_lists_and_revokes(
    settings: Settings, db: str, store: ApiKeyStore
) -> None:
    made = spindle(
        "create", "--tenant", "acme", "--user", "alice", "--role", "admin", settings=settings, db=db
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("spk_")
    assert "not shown again" in made.stderr
    identity = await store.verify(key)
    assert identity is not None and identity.roles == ("admin",)

    listed = spindle("list", "--tenant", "acme", settings=settings, db=db)
    assert listed.returncode == 0, listed.stderr
    key_id = key.split("_")[1]
    assert key_id in listed.stdout and "active" in listed.stdout
    assert key.rsplit("_", 1)[1] not in listed.stdout

    revoked = spindle("revoke", key_id, settings=settings, db=db)
    assert revoked.returncode == 0, revoked.stderr
    assert await store.verify(key) is None
    assert "revoked" in spindle("list", settings=settings, db=db).stdout

    unknown = spindle("revoke", "ffffffffffffffff", settings=settings, db=db)
    assert unknown.returncode == 1
    assert "was not found" in unknown.stderr


def _request_with_key(key: str) -> Request:
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/runs",
        "query_string": b"",
        "headers": [(b"x-api-key", key.encode())],
        "client": ("192.0.2.7", 40000),
    }
    return Request(scope)


async def test_a_flood_of_invalid_keys_evicts_the_oldest_not_the_keys_in_use(
    settings: Settings, db: str, store: ApiKeyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps the key in use off MongoDB while random keys pour in: the
    least recently used entries go, not the whole cache (seen here as a revoked key
    still served from the cache within its cache time)."""
    monkeypatch.setattr(authenticator_module, "KEY_CACHE_MAX", 3)
    auth = Authenticator(
        settings.model_copy(
            update={
                "mongo_db": db,
                "auth_disabled": False,
                "auth_secret": "integration-secret",
                "api_key_cache_seconds": 300,
            }
        ),
        keys=store,
    )
    created = await store.create(tenant_id="acme", user_id="alice")
    in_use = _request_with_key(created.key)
    assert (await auth.authenticate(in_use)).user_id == "alice"
    await store.revoke(created.info.key_id)

    async def invalid() -> None:
        with pytest.raises(Unauthorized):
            await auth.authenticate(_request_with_key(f"spk_{uuid.uuid4().hex[:16]}_{'x' * 43}"))

    await invalid()
    await invalid()
    assert (await auth.authenticate(in_use)).user_id == "alice"  # full now: 3 entries
    await invalid()  # evicts the oldest invalid key; the key in use stays
    assert (await auth.authenticate(in_use)).user_id == "alice"
    # A fresh authenticator asks MongoDB: the key is revoked there.
    fresh = Authenticator(
        settings.model_copy(
            update={"mongo_db": db, "auth_disabled": False, "auth_secret": "integration-secret"}
        ),
        keys=store,
    )
    with pytest.raises(Unauthorized):
        await fresh.authenticate(in_use)
