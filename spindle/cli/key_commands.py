"""``spindle keys``: create, list and revoke API keys in the configured MongoDB.

pymongo and pydantic are imported when a command runs, not when ``spindle``
builds its parser, so ``spindle --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from spindle.cli.direct_access import MONGO_DIRECT, described

if TYPE_CHECKING:
    from spindle.shared.store.api_keys import ApiKeyInfo, ApiKeyStore, CreatedApiKey


def add_keys_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "keys",
        help="create, list and revoke API keys (in MongoDB)",
        description=described("Create, list and revoke API keys.", MONGO_DIRECT),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    create = actions.add_parser(
        "create",
        help="mint an API key for a user of a tenant (printed once, stored hashed)",
        description=described(
            "Mint an API key for a user of a tenant; it is printed once and stored hashed.",
            MONGO_DIRECT,
        ),
    )
    create.add_argument("--tenant", required=True, help="the tenant the key acts for")
    create.add_argument("--user", required=True, help="the user the key acts as")
    create.add_argument(
        "--role", action="append", default=[], dest="roles", help="grant a role (repeatable)"
    )
    create.add_argument("--name", default=None, help="a note to recognise the key by")
    create.set_defaults(handler=_cmd_create)

    listing = actions.add_parser(
        "list",
        help="list keys (ids, never secrets)",
        description=described("List API keys: ids, never secrets.", MONGO_DIRECT),
    )
    listing.add_argument("--tenant", default=None, help="only this tenant's keys")
    listing.set_defaults(handler=_cmd_list)

    revoke = actions.add_parser(
        "revoke",
        help="revoke a key by its id",
        description=described("Revoke an API key by its id.", MONGO_DIRECT),
    )
    revoke.add_argument("key_id", help="the key id (the 16 hex digits after spk_)")
    revoke.set_defaults(handler=_cmd_revoke)


async def _with_store(action: Any) -> Any:
    from spindle.shared.platform.settings import get_settings
    from spindle.shared.store.api_keys import ApiKeyStore

    store = ApiKeyStore.from_settings(get_settings())
    try:
        return await action(store)
    finally:
        await store.close()


def _cmd_create(args: argparse.Namespace) -> int:
    async def create(store: ApiKeyStore) -> CreatedApiKey:
        return await store.create(
            tenant_id=args.tenant, user_id=args.user, roles=args.roles, name=args.name
        )

    created: CreatedApiKey = asyncio.run(_with_store(create))
    info = created.info
    print(created.key)
    print(
        f"key {info.key_id} for user {info.user_id} of tenant {info.tenant_id}"
        f"{' with roles ' + ', '.join(info.roles) if info.roles else ''}: "
        "store it now, it is not shown again",
        file=sys.stderr,
    )
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    async def listing(store: ApiKeyStore) -> list[ApiKeyInfo]:
        return await store.list(tenant_id=args.tenant)

    keys: list[ApiKeyInfo] = asyncio.run(_with_store(listing))
    if not keys:
        print("no API keys")
        return 0
    rows = [("KEY ID", "TENANT", "USER", "ROLES", "STATE", "CREATED", "NAME")]
    for key in keys:
        rows.append(
            (
                key.key_id,
                key.tenant_id,
                key.user_id,
                ",".join(key.roles) or "-",
                "revoked" if key.revoked else "active",
                key.created_at.strftime("%Y-%m-%d %H:%M"),
                key.name or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return 0


def _cmd_revoke(args: argparse.Namespace) -> int:
    async def revoke(store: ApiKeyStore) -> ApiKeyInfo:
        return await store.revoke(args.key_id)

    info: ApiKeyInfo = asyncio.run(_with_store(revoke))
    print(f"revoked key {info.key_id} of user {info.user_id} (tenant {info.tenant_id})")
    return 0
