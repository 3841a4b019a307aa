"""API keys through the gateway (``/keys``): role-checked, one tenant's only.

carol (tenant A, admin) manages tenant A's keys; bob (tenant A, no role) and
mallory (tenant B, graph-editor) may not; an admin of tenant B sees none of tenant
A's keys and cannot revoke them (404: another tenant's key is an unknown one).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.cli_runner import run_spindle
from tests.e2e.conftest import REPO_ROOT, Caller, SpindleStack, client_for
from tests.polling import eventually

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"


async def admin_of(settings: Settings, tenant: str, user: str) -> Caller:
    store = ApiKeyStore.from_settings(settings)
    try:
        created = await store.create(tenant_id=tenant, user_id=user, roles=["admin"])
    finally:
        await store.close()
    return Caller(tenant, user, created.key)


async def test_an_admin_creates_lists_and_revokes_its_tenants_keys(
    stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    carol = callers["carol"]
    async with client_for(stack, carol) as http:
        reply = await http.post(
            "/keys", json={"user": f"dora-{unique}", "roles": ["graph-editor"], "name": "ci"}
        )
        assert reply.status_code == 201, reply.text
        created = reply.json()
        info = created["info"]
        assert created["key"].startswith(f"spk_{info['key_id']}_")
        assert (info["tenant_id"], info["user_id"]) == (carol.tenant, f"dora-{unique}")
        assert info["roles"] == ["graph-editor"] and info["revoked"] is False

        listed = (await http.get("/keys")).json()["keys"]
        assert info["key_id"] in {k["key_id"] for k in listed}
        assert {k["tenant_id"] for k in listed} == {carol.tenant}
        assert all("key" not in k and "hash" not in k for k in listed), "never a secret"

        dora = Caller(carol.tenant, f"dora-{unique}", created["key"])
        async with client_for(stack, dora) as as_dora:
            assert (await as_dora.get("/graphs")).status_code == 200

            revoked = await http.delete(f"/keys/{info['key_id']}")
            assert revoked.status_code == 200, revoked.text
            assert revoked.json()["revoked"] is True

            async def refused() -> bool:
                return (await as_dora.get("/graphs")).status_code == 401

            # A gateway trusts a verified key for api_key_cache_seconds (0.5 here).
            await eventually(refused, what="the revoked key refused", timeout=10, interval=0.2)

        bad = await http.post("/keys", json={"user": "no spaces allowed"})
        assert bad.status_code == 422 and bad.headers["content-type"].startswith(PROBLEM)


@pytest.mark.parametrize("who", ["bob", "mallory"])
async def test_a_caller_without_the_admin_role_gets_403(
    stack: SpindleStack, callers: dict[str, Caller], who: str
) -> None:
    async with client_for(stack, callers[who]) as http:
        for method, path, body in (
            ("POST", "/keys", {"user": "eve"}),
            ("GET", "/keys", None),
            ("DELETE", "/keys/0123456789abcdef", None),
        ):
            reply = await http.request(method, path, json=body)
            assert reply.status_code == 403, (method, path, reply.text)
            assert reply.headers["content-type"].startswith(PROBLEM)
            assert "key_admin_roles" in reply.json()["detail"]
    async with client_for(stack, None) as anonymous:
        assert (await anonymous.get("/keys")).status_code == 401


async def test_another_tenants_admin_cannot_see_or_touch_the_keys(
    stack: SpindleStack, callers: dict[str, Caller], e2e_settings: Settings, unique: str
) -> None:
    carol = callers["carol"]
    other = await admin_of(e2e_settings, callers["mallory"].tenant, f"olga-{unique}")
    async with client_for(stack, carol) as http:
        created = (await http.post("/keys", json={"user": f"fred-{unique}"})).json()
    key_id = created["info"]["key_id"]

    async with client_for(stack, other) as http:
        listed = (await http.get("/keys")).json()["keys"]
        assert key_id not in {k["key_id"] for k in listed}
        assert {k["tenant_id"] for k in listed} == {other.tenant}
        gone = await http.delete(f"/keys/{key_id}")
        assert gone.status_code == 404 and gone.headers["content-type"].startswith(PROBLEM)
        for reply in (
            await http.post("/keys", json={"user": "eve", "tenant": carol.tenant}),
            await http.get("/keys", params={"tenant": carol.tenant}),
        ):
            assert reply.status_code == 403, reply.text
            assert carol.tenant in reply.json()["detail"]

    async with client_for(stack, carol) as http:
        still = {k["key_id"]: k for k in (await http.get("/keys")).json()["keys"]}
        assert still[key_id]["revoked"] is False, "the other tenant's admin revoked nothing"


def user_env(stack: SpindleStack, caller: Caller) -> dict[str, str]:
    """A user's environment: the gateway's address and a key, no server settings
    (a command that went to MongoDB instead would not find the test's database)."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if not any(server in name for server in ("MONGO", "TEMPORAL", "REDIS"))
    }
    return {
        **kept,
        "SPINDLE_URL": stack.base_url,
        "SPINDLE_API_KEY": caller.key,
        "PYTHONPATH": str(REPO_ROOT),
    }


async def test_spindle_keys_goes_through_the_gateway(
    stack: SpindleStack, callers: dict[str, Caller], unique: str, tmp_path: Path
) -> None:
    carol = callers["carol"]

    def spindle(caller: Caller, *args: str) -> subprocess.CompletedProcess[str]:
        return run_spindle("keys", *args, environ=user_env(stack, caller), cwd=tmp_path)

    made = spindle(carol, "create", "--user", f"gus-{unique}", "--role", "graph-editor")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    key_id = key.split("_")[1]
    assert f"of tenant {carol.tenant}" in made.stderr
    async with client_for(stack, carol) as http:
        listed = {k["key_id"]: k for k in (await http.get("/keys")).json()["keys"]}
    assert listed[key_id]["user_id"] == f"gus-{unique}"

    table = spindle(carol, "list")
    assert table.returncode == 0, table.stderr
    assert any(line.startswith(key_id) and "active" in line for line in table.stdout.splitlines())
    revoked = spindle(carol, "revoke", key_id)
    assert revoked.returncode == 0 and revoked.stdout.startswith(f"revoked key {key_id}")

    refused = spindle(callers["bob"], "create", "--user", "eve")
    assert refused.returncode == 1
    assert refused.stderr.startswith("spindle: error: ") and "key_admin_roles" in refused.stderr
    elsewhere = spindle(carol, "list", "--tenant", callers["mallory"].tenant)
    assert elsewhere.returncode == 1 and "--direct" in elsewhere.stderr


async def test_spindle_graphs_register_goes_through_the_gateway(
    stack: SpindleStack, callers: dict[str, Caller], unique: str, tmp_path: Path
) -> None:
    graph = tmp_path / "cli-graph.yaml"
    graph.write_text(
        f"name: cli-{unique}\n"
        "description: registered by spindle graphs register through the gateway\n"
        "entry: shout\n"
        "nodes:\n"
        "  - id: shout\n"
        "    type: output\n"
        "    params: {select: 'input'}\n"
    )
    done = run_spindle(
        "graphs", "register", str(graph), environ=user_env(stack, callers["alice"]), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"registered 1 graph(s): cli-{unique}"
    async with client_for(stack, callers["alice"]) as http:
        stored = await http.get(f"/graphs/cli-{unique}")
    assert stored.status_code == 200 and stored.json()["entry"] == "shout"

    refused = run_spindle(
        "graphs", "register", str(graph), environ=user_env(stack, callers["bob"]), cwd=tmp_path
    )
    assert refused.returncode == 1 and "graph_write_roles" in refused.stderr
