"""``spindle dev --auth``: the embedded stack with authentication on.

The stack needs a server secret (it signs stream tokens) and a first API key
to call it with. Both are kept in the data dir, readable by the user only, so
a restart keeps working with the same key: ``<data dir>/auth/secret`` and
``<data dir>/auth/admin-key``. The key belongs to user ``admin`` of tenant
``default`` (where the example graphs are registered) with role ``admin``:
it may control every run and edit graphs (docs/operations/threat-model.md).
Delete the folder, or revoke the key with ``spindle keys revoke``, to start over.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from pathlib import Path

from spindle.shared.contracts.identity import DEV_TENANT
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore

ADMIN_USER = "admin"
ADMIN_ROLES = ["admin"]


def _private_file(path: Path, make: str) -> str:
    """The text of ``path``; first written as ``make`` (mode 0600) if absent."""
    if path.is_file():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.write(make + "\n")
    return make


def dev_auth_secret(data_dir: Path) -> str:
    """The stack's server secret, made once per data dir."""
    return _private_file(data_dir / "auth" / "secret", secrets.token_urlsafe(32))


async def _admin_key(settings: Settings, stored: str | None) -> tuple[str, bool]:
    """``stored`` while it verifies, else a new key; and whether it is new."""
    keys = ApiKeyStore.from_settings(settings)
    try:
        if stored is not None and await keys.verify(stored) is not None:
            return stored, False
        created = await keys.create(
            tenant_id=DEV_TENANT, user_id=ADMIN_USER, roles=ADMIN_ROLES, name="spindle dev --auth"
        )
    finally:
        await keys.close()
    return created.key, True


def dev_admin_key(settings: Settings, data_dir: Path) -> str:
    """The first admin API key of the stack: the stored one while it is valid, else a new one
    (revoked, or the database was wiped)."""
    key_file = data_dir / "auth" / "admin-key"
    stored = key_file.read_text().strip() if key_file.is_file() else None
    key, new = asyncio.run(_admin_key(settings, stored))
    if new:
        key_file.unlink(missing_ok=True)
        _private_file(key_file, key)
    return key
