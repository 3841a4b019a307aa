"""``spindle keys``: create, list and revoke API keys.

Through the gateway's ``/keys`` (role ``key_admin_roles``, the caller's own tenant)
whenever a gateway is known; with ``--direct`` (or no gateway known) in the
configured MongoDB, any tenant: the bootstrap path (spindle.cli.gateway_admin).

pymongo and pydantic are imported when a command runs, not when ``spindle``
builds its parser, so ``spindle --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from spindle.cli.direct_access import GATEWAY_OR_MONGO, described
from spindle.cli.gateway_admin import add_route_flags, gateway_call, through_gateway

# What each keys command talks to, as its --help says.
KEYS_REACH = described(
    "Through the gateway a key is of the caller's own tenant and needs a role in "
    "key_admin_roles; --direct reaches any tenant (the first admin key).",
    GATEWAY_OR_MONGO,
)

if TYPE_CHECKING:
    from spindle.shared.store.api_keys import ApiKeyInfo, ApiKeyStore, CreatedApiKey


def add_keys_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "keys",
        help="create, list and revoke API keys (through the gateway, or --direct)",
        description=described("Create, list and revoke API keys.", KEYS_REACH),
    )
    actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)

    create = actions.add_parser(
        "create",
        help="mint an API key for a user of a tenant (printed once, stored hashed)",
        description=described(
            "Mint an API key for a user of a tenant; it is printed once and stored hashed.",
            KEYS_REACH,
        ),
    )
    create.add_argument(
        "--tenant",
        default=None,
        help="the tenant the key acts for (required with --direct; else the caller's own)",
    )
    create.add_argument("--user", required=True, help="the user the key acts as")
    create.add_argument(
        "--role", action="append", default=[], dest="roles", help="grant a role (repeatable)"
    )
    create.add_argument("--name", default=None, help="a note to recognise the key by")
    add_route_flags(create)
    create.set_defaults(handler=_cmd_create)

    listing = actions.add_parser(
        "list",
        help="list keys (ids, never secrets)",
        description=described("List API keys: ids, never secrets.", KEYS_REACH),
    )
    listing.add_argument("--tenant", default=None, help="only this tenant's keys")
    add_route_flags(listing)
    listing.set_defaults(handler=_cmd_list)

    revoke = actions.add_parser(
        "revoke",
        help="revoke a key by its id",
        description=described("Revoke an API key by its id.", KEYS_REACH),
    )
    revoke.add_argument("key_id", help="the key id (the 16 hex digits after spk_)")
    add_route_flags(revoke)
    revoke.set_defaults(handler=_cmd_revoke)


async def _with_store(action: Any) -> Any:
    from spindle.cli.stack_settings import cli_settings
    from spindle.shared.store.api_keys import ApiKeyStore

    store = ApiKeyStore.from_settings(cli_settings())
    try:
        return await action(store)
    finally:
        await store.close()


def _cmd_create(args: argparse.Namespace) -> int:
    from spindle.shared.store.api_keys import CreatedApiKey

    created: CreatedApiKey
    if through_gateway(args):
        body = {"user": args.user, "roles": args.roles, "name": args.name, "tenant": args.tenant}
        created = CreatedApiKey.model_validate(gateway_call(args, "POST", "/keys", json=body))
    else:
        if args.tenant is None:
            from spindle.shared.contracts.errors import InvalidRequest

            raise InvalidRequest("--tenant is required when writing to MongoDB directly")

        async def create(store: ApiKeyStore) -> CreatedApiKey:
            return await store.create(
                tenant_id=args.tenant, user_id=args.user, roles=args.roles, name=args.name
            )

        created = asyncio.run(_with_store(create))
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

    from spindle.shared.store.api_keys import ApiKeyInfo

    keys: list[ApiKeyInfo]
    if through_gateway(args):
        params = {"tenant": args.tenant} if args.tenant else None
        answer = gateway_call(args, "GET", "/keys", params=params)
        keys = [ApiKeyInfo.model_validate(key) for key in answer["keys"]]
    else:
        keys = asyncio.run(_with_store(listing))
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

    from spindle.shared.store.api_keys import ApiKeyInfo

    info: ApiKeyInfo
    if through_gateway(args):
        info = ApiKeyInfo.model_validate(gateway_call(args, "DELETE", f"/keys/{args.key_id}"))
    else:
        info = asyncio.run(_with_store(revoke))
    print(f"revoked key {info.key_id} of user {info.user_id} (tenant {info.tenant_id})")
    return 0
