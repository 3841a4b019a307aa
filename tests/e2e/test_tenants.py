"""Tenant isolation and run permissions over HTTP, route by route.

The operations come from the gateway's own OpenAPI document, so a route added
later without a tenant check, or without being classified here, fails this
suite. Another tenant's run must answer exactly as an unknown id does.
"""

from __future__ import annotations

import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.conftest import (
    E2E_JWT_AUDIENCE,
    E2E_JWT_ISSUER,
    E2E_JWT_SECRET,
    Caller,
    SpindleStack,
    client_for,
)
from tests.e2e.run_driver import T, answer, start, wait_for_status
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e

# Liveness, readiness and the graph JSON Schema hold no tenant data (like /openapi.json).
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),  # Prometheus scrape: counts only, no tenant data
    ("GET", "/graphs/schema"),
    ("GET", "/schemas/execution-payload"),  # a JSON Schema, like /graphs/schema
    # The A2A agent card (gateway/protocols/a2a/agent_card.py): discovery is public by design.
    ("GET", "/.well-known/agent-card.json"),
    ("GET", "/.well-known/agent-card"),
    ("GET", "/.well-known/agent.json"),
}
# Operations that do not address a run: each is scoped to the caller's tenant.
TENANT_SCOPED = {
    ("POST", "/runs"),
    ("GET", "/runs"),
    ("GET", "/graphs"),
    ("GET", "/graphs/{name}"),
    ("PUT", "/graphs/{name}"),
    # The workers' tool catalog: the same for every tenant, but only for callers with a key.
    ("GET", "/tools"),
    # A conversation id is looked up in the caller's tenant only (docs/conversations.md).
    ("GET", "/conversations/{conversation_id}/runs"),
    ("GET", "/conversations/{conversation_id}"),
    ("POST", "/schedules"),
    ("GET", "/schedules"),
    # AG-UI (tests/e2e/test_agui.py): threads are per tenant; another's is unknown (404).
    ("POST", "/agui/{graph}"),
    ("GET", "/inbox"),
    # API keys (tests/e2e/test_api_keys.py): an admin's own tenant's keys only; another
    # tenant's key is unknown (404), naming another tenant is refused (403).
    ("POST", "/keys"),
    ("GET", "/keys"),
    ("DELETE", "/keys/{key_id}"),
    # MCP (tests/e2e/test_mcp.py): tools are the caller's tenant's graphs; a session
    # is its opener's only (test_an_mcp_session_is_its_openers_only below).
    ("POST", "/mcp"),
    ("GET", "/mcp"),
    ("DELETE", "/mcp"),
    # Compare (tests/e2e/test_compare.py): both runs must be the caller's tenant's; a run
    # of another tenant answers as an unknown one (404).
    ("GET", "/runs/{a}/compare/{b}"),
    # Evaluations (tests/e2e/test_evaluations.py): the caller's tenant's only; another
    # tenant's evaluation is unknown (404), its runs are forked under the caller's tenant.
    ("POST", "/evaluations"),
    ("GET", "/evaluations"),
    ("GET", "/evaluations/{evaluation_id}"),
    ("POST", "/evaluations/{evaluation_id}/cancel"),
    ("GET", "/evaluations/{evaluation_id}/stream"),
}
PROBLEM = "application/problem+json"


def operations(openapi: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in openapi["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"}
    ]


def concrete(path: str, workflow_id: str, run_id: str) -> str:
    values = {
        "workflow_id": workflow_id,
        "run_id": run_id,
        "name": "UserInput",
        "launch_id": "ws-1",
        "conversation_id": "conversation-of-nobody",
        "schedule_id": "nightly",
        "node_id": "review",
        "graph": "approval-flow",
        "key_id": "key-of-nobody",
        "a": workflow_id,
        "b": workflow_id,
        "evaluation_id": "eval-of-nobody",
    }
    if "/files/" in path:
        values["name"] = "notes.txt"
    elif path.startswith("/graphs/"):
        values["name"] = "approval-flow"
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


async def call(client: httpx.AsyncClient, method: str, path: str) -> httpx.Response:
    """One request of the kind the operation takes; the stream is read for its status only."""
    if path.endswith("/stream"):
        async with client.stream(method, path, headers={"Accept": "text/event-stream"}) as reply:
            if reply.status_code != 200:
                await reply.aread()
            return reply
    if method in {"POST", "PUT"} and path.endswith("/files"):
        return await client.request(method, path, files={"file": ("notes.txt", b"hello")})
    if method in {"POST", "PUT"}:
        return await client.request(method, path, json={"message": "approve"})
    return await client.request(method, path)


@pytest.fixture(scope="module")
async def openapi(http: httpx.AsyncClient) -> dict[str, Any]:
    reply = await http.get("/openapi.json")
    assert reply.status_code == 200
    document: dict[str, Any] = reply.json()
    return document


@pytest.fixture(scope="module")
async def waiting_run(http: httpx.AsyncClient, examples: list[str]) -> dict[str, Any]:
    """alice's run, paused on its approval prompt."""
    run = await start(http, graph="approval-flow", input={"topic": "tenancy"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    return run


@pytest.fixture
async def as_(stack: SpindleStack, callers: dict[str, Caller]) -> AsyncIterator[Any]:
    clients: list[httpx.AsyncClient] = []

    def make(user: str | None) -> httpx.AsyncClient:
        client = client_for(stack, callers[user] if user else None)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


async def test_every_route_is_classified(openapi: dict[str, Any]) -> None:
    for method, path in operations(openapi):
        run_route = "{workflow_id}" in path or "{schedule_id}" in path
        assert run_route or (method, path) in PUBLIC | TENANT_SCOPED, (
            f"{method} {path} is neither public, tenant-scoped nor per-run: classify it here "
            "and give it a tenant check"
        )


async def test_every_protected_route_needs_credentials(
    openapi: dict[str, Any], waiting_run: dict[str, Any], as_: Any
) -> None:
    anonymous = as_(None)
    for method, path in operations(openapi):
        if (method, path) in PUBLIC:
            continue
        url = concrete(path, waiting_run["workflow_id"], waiting_run["run_id"])
        reply = await call(anonymous, method, url)
        assert reply.status_code == 401, f"{method} {path}: {reply.status_code}"
        assert reply.headers["content-type"].startswith(PROBLEM)
        assert reply.headers["www-authenticate"].startswith("Bearer")
    bad_key = await anonymous.get("/runs", headers={"Authorization": f"Bearer spk_{'0' * 16}_x"})
    assert bad_key.status_code == 401
    assert "invalid" in bad_key.json()["detail"]


async def test_another_tenants_run_answers_exactly_as_an_unknown_one(
    openapi: dict[str, Any], waiting_run: dict[str, Any], as_: Any
) -> None:
    mallory = as_("mallory")
    real_wf, real_run = waiting_run["workflow_id"], waiting_run["run_id"]
    fake_wf, fake_run = f"run-{uuid.uuid4().hex}", uuid.uuid4().hex
    checked = 0
    for method, path in operations(openapi):
        if "{workflow_id}" not in path:
            continue
        theirs = await call(mallory, method, concrete(path, real_wf, real_run))
        unknown = await call(mallory, method, concrete(path, fake_wf, fake_run))
        assert theirs.status_code == unknown.status_code == 404, f"{method} {path}"
        mine, nothing = theirs.json(), unknown.json()
        assert mine["title"] == nothing["title"]
        assert mine["detail"].replace(real_wf, "ID") == nothing["detail"].replace(fake_wf, "ID")
        checked += 1
    assert checked >= 10
    # And nothing reached the run: it still waits for alice's answer.
    assert (await wait_for_status(as_("alice"), real_wf, {"paused"}))["status"] == "paused"


async def test_another_tenants_schedule_answers_exactly_as_an_unknown_one(
    openapi: dict[str, Any], as_: Any, examples: list[str], unique: str
) -> None:
    alice, mallory = as_("alice"), as_("mallory")
    mine = f"sched-{unique}"
    body = {"id": mine, "graph": "pipeline", "input": {"text": "x"}, "cron": "0 3 * * *"}
    assert (await alice.post("/schedules", json=body)).status_code == 201
    checked = 0
    for method, path in operations(openapi):
        if "{schedule_id}" not in path:
            continue
        theirs = await call(mallory, method, path.replace("{schedule_id}", mine))
        unknown = await call(mallory, method, path.replace("{schedule_id}", f"none-{unique}"))
        assert theirs.status_code == unknown.status_code == 404, f"{method} {path}"
        assert theirs.json()["title"] == unknown.json()["title"]
        assert theirs.json()["detail"].replace(mine, "ID") == unknown.json()["detail"].replace(
            f"none-{unique}", "ID"
        )
        checked += 1
    assert checked >= 7
    listed = (await mallory.get("/schedules")).json()["schedules"]
    assert mine not in {s["id"] for s in listed}
    # Nothing reached it: still there, not paused, no run started.
    still = (await alice.get(f"/schedules/{mine}")).json()
    assert (still["paused"], still["runs_started"]) == (False, 0)


async def test_lists_and_graphs_show_only_the_callers_tenant(
    waiting_run: dict[str, Any], as_: Any, unique: str
) -> None:
    mallory, alice = as_("mallory"), as_("alice")
    listed = (await mallory.get("/runs")).json()
    assert waiting_run["workflow_id"] not in {r["workflow_id"] for r in listed["runs"]}
    assert waiting_run["workflow_id"] in {
        r["workflow_id"] for r in (await alice.get("/runs", params={"limit": 500})).json()["runs"]
    }
    assert "approval-flow" not in {
        g["name"] for g in (await mallory.get("/graphs")).json()["graphs"]
    }
    assert (await mallory.get("/graphs/approval-flow")).status_code == 404
    # The inbox: alice's waiting prompt is hers alone (mallory sees no item of tenant A).
    assert waiting_run["workflow_id"] in {
        i["workflow_id"] for i in (await alice.get("/inbox", params={"limit": 200})).json()["items"]
    }
    assert waiting_run["workflow_id"] not in {
        i["workflow_id"]
        for i in (await mallory.get("/inbox", params={"limit": 200})).json()["items"]
    }
    refused = await mallory.post("/runs", json={"graph": "approval-flow", "input": {"topic": "x"}})
    assert refused.status_code == 404
    # Same graph name, two tenants, two graphs (alice and mallory hold graph-editor).
    spec = (await alice.get("/graphs/approval-flow")).json()
    spec["description"] = f"mallory's own {unique}"
    assert (await mallory.put("/graphs/approval-flow", json=spec)).status_code == 201
    assert (await mallory.get("/graphs/approval-flow")).json()["description"] == spec["description"]
    assert (await alice.get("/graphs/approval-flow")).json()["description"] != spec["description"]


async def test_only_the_owner_or_a_run_control_role_may_answer_or_cancel(
    http: httpx.AsyncClient, examples: list[str], as_: Any
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "permissions"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    bob, carol = as_("bob"), as_("carol")
    # bob is of the same tenant: he sees the run but may not control it.
    assert (await bob.get(f"/runs/{run['workflow_id']}")).status_code == 200
    refused = await answer(bob, run, {"data": {"decision": "approve"}})
    assert refused.status_code == 403, refused.text
    assert "owner" in refused.json()["detail"]
    assert (await bob.post(f"/runs/{run['workflow_id']}/cancel")).status_code == 403
    # carol holds the admin role: she may; her answer carries who she is.
    accepted = await answer(carol, run, {"data": {"decision": "approve"}, "user_id": "alice"})
    assert accepted.status_code == 200, accepted.text
    await wait_for_status(http, run["workflow_id"], {"completed"})
    messages = (await http.get(f"/runs/{run['workflow_id']}/{run['run_id']}/updates")).json()
    questions = [m for m in messages["messages"] if m["t"] == T.QUESTION]
    assert [q["d"]["user_id"] for q in questions] == ["carol"]


async def test_a_stream_token_reads_one_run_only_and_never_controls_it(
    http: httpx.AsyncClient, examples: list[str], as_: Any, stack: SpindleStack
) -> None:
    first = await start(http, graph="approval-flow", input={"topic": "tokens"})
    second = await start(http, graph="approval-flow", input={"topic": "other"})
    await wait_for_status(http, first["workflow_id"], {"paused"})
    minted = await http.post(f"/runs/{first['workflow_id']}/stream-token")
    assert minted.status_code == 200, minted.text
    token = minted.json()["access_token"]
    browser = as_(None)  # an EventSource: no headers, the token in the query
    url = f"/runs/{first['workflow_id']}/{first['run_id']}/stream"
    async with open_sse(browser, url, params={"access_token": token}) as stream:
        assert stream.response.status_code == 200
        asked = await stream.until_type(T.REQUEST_INPUT)
        assert asked.json()["t"] == T.REQUEST_INPUT
    other = f"/runs/{second['workflow_id']}/{second['run_id']}/stream"
    async with open_sse(browser, other, params={"access_token": token}) as stream:
        assert stream.response.status_code == 404
    as_bearer = {"Authorization": f"Bearer {token}"}
    signal = await browser.post(
        f"/runs/{first['workflow_id']}/{first['run_id']}/signal/UserInput",
        json={"data": {"decision": "approve"}},
        headers=as_bearer,
    )
    assert signal.status_code == 403
    again = await browser.post(f"/runs/{first['workflow_id']}/stream-token", headers=as_bearer)
    assert again.status_code == 403
    # Not on a POST query string, and never in the gateway's log.
    query_post = await browser.post(f"/runs/{first['workflow_id']}/cancel?access_token={token}")
    assert query_post.status_code == 401
    log_text = stack.gateway.log_path.read_text(errors="replace")
    assert token not in log_text
    assert "access_token=***" in log_text


# The stream-token column: what a token minted for one run's stream may call.
STREAM_TOKEN_READS = {
    ("GET", "/runs/{workflow_id}/{run_id}/stream"),
    ("GET", "/runs/{workflow_id}/{run_id}/updates"),
    ("GET", "/api/v1/workflows/runs/{workflow_id}/{run_id}/stream"),
    ("GET", "/api/v1/workflows/runs/{workflow_id}/{run_id}/updates"),
}


async def test_a_stream_token_reaches_its_runs_stream_and_history_and_nothing_else(
    openapi: dict[str, Any], waiting_run: dict[str, Any], as_: Any
) -> None:
    alice, browser, holder = as_("alice"), as_(None), as_(None)
    wf, run_id = waiting_run["workflow_id"], waiting_run["run_id"]
    minted = await alice.post(f"/runs/{wf}/stream-token")
    token = minted.json()["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    holder.headers.update(bearer)
    allowed = 0
    for method, path in operations(openapi):
        if (method, path) in PUBLIC:
            continue
        url = concrete(path, wf, run_id)
        with_header = await call(holder, method, url)
        if (method, path) in STREAM_TOKEN_READS:
            assert with_header.status_code == 200, f"{method} {path}: {with_header.status_code}"
            allowed += 1
            continue
        assert with_header.status_code == 403, f"{method} {path}: {with_header.status_code}"
        assert with_header.headers["content-type"].startswith(PROBLEM)
        if method == "GET":  # the EventSource way: the token in the query string
            in_query = await browser.get(url, params={"access_token": token})
            assert in_query.status_code == 403, f"{method} {path} ?access_token"
    assert allowed == len(STREAM_TOKEN_READS)
    # Not on the JSON-RPC doors either: seed 003's task methods, A2A's methods.
    tasks_call = {"jsonrpc": "2.0", "id": 1, "method": "tasks.list", "params": {}}
    replied = (await browser.post("/", json=tasks_call, headers=bearer)).json()
    assert replied["error"]["code"] == -32004, replied
    a2a_call = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": wf}}
    a2a = await browser.post("/", json=a2a_call, headers=bearer)
    assert a2a.status_code == 401, a2a.text
    # Nothing reached the run.
    assert (await wait_for_status(alice, wf, {"paused"}))["status"] == "paused"


async def test_mcp_needs_credentials_and_is_closed_to_stream_tokens(
    waiting_run: dict[str, Any], as_: Any
) -> None:
    """``/mcp`` is behind the same doors; its tenant scoping (tools = the caller's
    graphs) is checked in tests/e2e/test_mcp.py."""
    alice, anonymous = as_("alice"), as_(None)
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    reply = await anonymous.post("/mcp", json=listing)
    assert reply.status_code == 401 and reply.headers["content-type"].startswith(PROBLEM)
    assert reply.headers["www-authenticate"].startswith("Bearer")
    minted = await alice.post(f"/runs/{waiting_run['workflow_id']}/stream-token")
    bearer = {"Authorization": f"Bearer {minted.json()['access_token']}"}
    scoped = await anonymous.post("/mcp", json=listing, headers=bearer)
    assert scoped.status_code == 403 and scoped.headers["content-type"].startswith(PROBLEM)


MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_an_mcp_session_is_its_openers_only(as_: Any) -> None:
    """Another tenant's caller, or another user of the same tenant, naming a session
    gets exactly what an unknown session gets; the opener's session is untouched."""
    alice, bob, mallory = as_("alice"), as_("bob"), as_("mallory")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "tenancy", "version": "1"},
        },
    }
    async with alice.stream("POST", "/mcp", json=initialize, headers=MCP_ACCEPT) as opened:
        assert opened.status_code == 200
        session = opened.headers["mcp-session-id"]
        await opened.aread()
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    for intruder in (mallory, bob):
        for method in ("POST", "GET", "DELETE"):
            body = listing if method == "POST" else None
            theirs, unknown = [
                await intruder.request(
                    method, "/mcp", json=body, headers={**MCP_ACCEPT, "Mcp-Session-Id": sid}
                )
                for sid in (session, uuid.uuid4().hex)
            ]
            assert theirs.status_code == unknown.status_code == 404, method
            assert theirs.json() == unknown.json()
            assert theirs.json()["error"]["message"] == "Session not found"
    ended = await alice.delete("/mcp", headers={**MCP_ACCEPT, "Mcp-Session-Id": session})
    assert ended.status_code == 200


async def test_a_jwt_of_the_tenant_reads_its_runs(
    waiting_run: dict[str, Any], as_: Any, callers: dict[str, Caller]
) -> None:
    def bearer(tenant: str, user: str) -> dict[str, str]:
        claims = {
            "sub": user,
            "tenant": tenant,
            "iss": E2E_JWT_ISSUER,
            "aud": E2E_JWT_AUDIENCE,
            "exp": int(time.time()) + 60,
        }
        return {"Authorization": f"Bearer {jwt.encode(claims, E2E_JWT_SECRET, 'HS256')}"}

    anonymous = as_(None)
    path = f"/runs/{waiting_run['workflow_id']}"
    tenant_a, tenant_b = callers["alice"].tenant, callers["mallory"].tenant
    mine = await anonymous.get(path, headers=bearer(tenant_a, "alice"))
    assert mine.status_code == 200
    assert mine.json()["tenant_id"] == tenant_a
    assert (await anonymous.get(path, headers=bearer(tenant_b, "eve"))).status_code == 404
    forged = jwt.encode({"sub": "alice", "tenant": tenant_a, "exp": 2**31}, secrets.token_hex(16))
    refused = await anonymous.get(path, headers={"Authorization": f"Bearer {forged}"})
    assert refused.status_code == 401


async def test_a_revoked_key_stops_working(stack: SpindleStack, as_: Any) -> None:
    from spindle.shared.store.api_keys import ApiKeyStore

    keys = ApiKeyStore.from_settings(stack.settings)
    try:
        created = await keys.create(tenant_id="tenant-revoke", user_id="temp")
        client = as_(None)
        headers = {"X-API-Key": created.key}
        assert (await client.get("/runs", headers=headers)).status_code == 200
        await keys.revoke(created.info.key_id)

        async def refused() -> bool:
            return (await client.get("/runs", headers=headers)).status_code == 401

        await eventually(refused, what="the revoked key is refused", timeout=10, interval=0.1)
    finally:
        await keys.close()


async def test_only_a_schedules_owner_or_a_schedule_admin_changes_it(
    as_: Any, examples: list[str], stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    # Issue 28 (medium): any no-role user of the tenant could change anyone's schedule.
    from spindle.shared.store.api_keys import ApiKeyStore

    keys = ApiKeyStore.from_settings(stack.settings)
    try:
        made = await keys.create(
            tenant_id=callers["alice"].tenant, user_id="dana", roles=["schedule-admin"]
        )
    finally:
        await keys.close()
    alice, bob, mallory = as_("alice"), as_("bob"), as_("mallory")
    dana = as_(None)
    dana.headers["Authorization"] = f"Bearer {made.key}"
    mine = f"owned-{unique}"
    body = {"graph": "pipeline", "input": {"text": "x"}, "interval_seconds": 3600}
    created = await alice.post("/schedules", json={"id": mine, "paused": True, **body})
    assert created.status_code == 201, created.text
    assert created.json()["user_id"] == "alice"
    now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    span = {"start": (now - timedelta(hours=1, minutes=30)).isoformat(), "end": now.isoformat()}
    changes = [
        ("PUT", "", {**body, "interval_seconds": 7200}),
        ("POST", "/pause", None),
        ("POST", "/unpause", None),
        ("POST", "/trigger", None),
        ("POST", "/backfill", span),
        ("DELETE", "", None),
    ]
    for method, suffix, payload in changes:
        url = f"/schedules/{mine}{suffix}"
        # bob: same tenant, no role: sees it, may not change it.
        refused = await bob.request(method, url, json=payload)
        assert refused.status_code == 403, f"{method} {suffix}: {refused.text}"
        assert "schedule_admin_roles" in refused.json()["detail"]
        # mallory: another tenant: the schedule does not exist for her.
        assert (await mallory.request(method, url, json=payload)).status_code == 404
    assert (await bob.get(f"/schedules/{mine}")).status_code == 200
    still = (await alice.get(f"/schedules/{mine}")).json()
    assert (still["paused"], still["interval_seconds"], still["runs_started"]) == (True, 3600, 0)

    # A schedule admin may replace it; the new graph still runs as its owner.
    replaced = await dana.put(f"/schedules/{mine}", json={**body, "interval_seconds": 7200})
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["interval_seconds"], replaced.json()["user_id"]) == (7200, "alice")
    assert (await as_("carol").post(f"/schedules/{mine}/unpause")).status_code == 200  # admin
    # The owner may do everything.
    assert (await alice.post(f"/schedules/{mine}/pause")).status_code == 200
    assert (await alice.post(f"/schedules/{mine}/trigger")).status_code == 202
    assert (await alice.delete(f"/schedules/{mine}")).status_code == 204
