"""Per-tenant limits over HTTP: run starts and signals per minute (429 with
Retry-After) on every path that starts runs, concurrent streams on every
streaming transport, the JSON-RPC batch cap. A gateway of its own with tight limits,
served by the e2e stack's worker; other tenants are not affected."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from spindle.dev.processes import free_port
from spindle.shared.platform.redis_connect import connect_redis
from spindle.shared.platform.run_start_permits import decision_key
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.e2e.conftest import SpindleStack, example_graph, start_gateway
from tests.e2e.run_driver import wait_for_status
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e

RUN_STARTS, SIGNALS, STREAMS, BATCH = 2, 3, 1, 5


@pytest.fixture(scope="module")
def tight_gateway(stack: SpindleStack, artifacts_dir: Path) -> Iterator[str]:
    settings = stack.settings.model_copy(
        update={
            "gateway_port": free_port(),
            "rate_limit_run_starts": RUN_STARTS,
            "rate_limit_signals": SIGNALS,
            "max_streams_per_tenant": STREAMS,
            "jsonrpc_max_batch": BATCH,
        }
    )
    proc = start_gateway(settings, "tight gateway", artifacts_dir / "e2e")
    base = f"http://127.0.0.1:{settings.gateway_port}"
    yield base
    proc.stop()


async def client_of(
    settings: Settings, base: str, tenant: str, roles: list[str] | None = None
) -> httpx.AsyncClient:
    keys = ApiKeyStore.from_settings(settings)
    try:
        created = await keys.create(tenant_id=tenant, user_id="user", roles=roles)
    finally:
        await keys.close()
    headers = {"Authorization": f"Bearer {created.key}"}
    return httpx.AsyncClient(base_url=base, headers=headers, timeout=30)


@pytest.fixture
async def tenants(
    stack: SpindleStack, tight_gateway: str, unique: str
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:
    first = await client_of(stack.settings, tight_gateway, f"busy-{unique}")
    second = await client_of(stack.settings, tight_gateway, f"calm-{unique}")
    yield first, second
    await first.aclose()
    await second.aclose()


def start_body() -> dict[str, Any]:
    return {"graph_spec": example_graph("approval-flow"), "input": {"topic": "limits"}}


def throttled(reply: httpx.Response, setting: str) -> None:
    assert reply.status_code == 429, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert int(reply.headers["retry-after"]) >= 1
    assert setting in reply.json()["detail"]


async def test_run_starts_beyond_the_rate_get_429(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    busy, calm = tenants
    for _ in range(RUN_STARTS):
        assert (await busy.post("/runs", json=start_body())).status_code == 201
    refused = await busy.post("/runs", json=start_body())
    throttled(refused, "rate_limit_run_starts")
    # An AG-UI run is a run start like any other (tests/e2e/test_agui.py).
    agui = {"threadId": "t-limits", "runId": "r1", "messages": []}
    throttled(await busy.post("/agui/approval-flow", json=agui), "rate_limit_run_starts")
    listed = (await busy.get("/runs")).json()
    assert listed["total"] == RUN_STARTS  # the refused start left nothing behind
    assert (await calm.post("/runs", json=start_body())).status_code == 201


async def test_signals_beyond_the_rate_get_429(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    busy, _ = tenants
    run = (await busy.post("/runs", json=start_body())).json()
    await wait_for_status(busy, run["workflow_id"], {"paused"})
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/signal/UserInput"
    for _ in range(SIGNALS):
        wrong = await busy.post(url, json={"data": {"decision": "maybe"}})
        assert wrong.status_code == 422
    throttled(await busy.post(url, json={"data": {"decision": "approve"}}), "rate_limit_signals")
    assert (await busy.get(f"/runs/{run['workflow_id']}")).json()["status"] == "paused"


async def test_open_streams_are_capped_per_tenant_and_freed_on_disconnect(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    busy, calm = tenants
    run = (await busy.post("/runs", json=start_body())).json()
    other = (await calm.post("/runs", json=start_body())).json()
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
    async with open_sse(busy, url) as held:
        assert held.response.status_code == 200
        async with open_sse(busy, url) as second:
            assert second.response.status_code == 429
            assert "max_streams_per_tenant" in (await second.response.aread()).decode()
        other_url = f"/runs/{other['workflow_id']}/{other['run_id']}/stream"
        async with open_sse(calm, other_url) as theirs:
            assert theirs.response.status_code == 200

    async def slot_free() -> bool:
        async with open_sse(busy, url) as again:
            return again.response.status_code == 200

    await eventually(slot_free, what="the stream slot is given back", timeout=10, interval=0.1)


def execute_call(ref: str, *, stream: bool = False) -> dict[str, Any]:
    tree = [
        {"id": "root", "name": ref},
        {
            "id": "a",
            "name": "a",
            "parent_id": "root",
            "schemas": {"method": "tool"},
            "params": {"tool": "word_count"},
            "inputs": {"text": "one two"},
        },
    ]
    params: dict[str, Any] = {"tasks": tree}
    if stream:
        params["use_streaming"] = True
    return {"jsonrpc": "2.0", "id": ref, "method": "tasks.execute", "params": params}


def a2a_stream_call(text: str) -> dict[str, Any]:
    message = {"kind": "message", "role": "user", "messageId": text, "parts": []}
    message["parts"] = [{"kind": "text", "text": text}]
    return {
        "jsonrpc": "2.0",
        "id": text,
        "method": "message/stream",
        "params": {"message": message},
    }


async def test_every_path_that_starts_runs_takes_the_run_start_limit(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    # Issue 15 (M2): a batch of tasks.execute started a run per member while POST /runs got 429.
    busy, calm = tenants
    batch = [execute_call(f"b{n}") for n in range(RUN_STARTS + 1)]
    answers = {a["id"]: a for a in (await busy.post("/", json=batch)).json()}
    started = [a for a in answers.values() if "result" in a]
    refused = [a for a in answers.values() if "error" in a]
    assert len(started) == RUN_STARTS, answers
    assert [a["error"]["code"] for a in refused] == [-32005]
    assert "rate_limit_run_starts" in refused[0]["error"]["data"]["detail"]
    assert refused[0]["error"]["data"]["retry_after"] >= 1
    assert (await busy.get("/runs")).json()["total"] == RUN_STARTS

    throttled(await busy.post("/runs", json=start_body()), "rate_limit_run_starts")
    source = started[0]["result"]["workflow_id"]
    fork = await busy.post(f"/runs/{source}/fork", json={"from_node": "a"})
    throttled(fork, "rate_limit_run_starts")
    single = (await busy.post("/", json=execute_call("single"))).json()
    assert single["error"]["code"] == -32005
    a2a = (await busy.post("/", json={**a2a_stream_call("hi"), "method": "message/send"})).json()
    assert "error" in a2a and "rate_limit_run_starts" in a2a["error"]["message"], a2a
    # A2A's own error, naming the limit: not an InternalError (-32603).
    assert a2a["error"]["code"] == -32600, a2a
    assert a2a["error"]["data"]["reason"] == "RATE_LIMITED"
    assert int(a2a["error"]["data"]["retryAfter"]) >= 1
    v1 = {"messageId": "v1-over", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    over = await busy.post(
        "/",
        json={"jsonrpc": "2.0", "id": "v1", "method": "SendMessage", "params": {"message": v1}},
        headers={"A2A-Version": "1.0"},
    )
    error = over.json()["error"]
    assert error["code"] == -32600 and "rate_limit_run_starts" in error["message"], error
    [info] = [d for d in error["data"] if d["@type"].endswith("ErrorInfo")]
    assert info["metadata"]["reason"] == "RATE_LIMITED"
    assert (await busy.get("/runs")).json()["total"] == RUN_STARTS, "nothing else started"
    assert (await calm.post("/", json=execute_call("calm"))).json()["result"]["status"] == "started"


async def test_schedule_starts_and_mcp_tool_calls_take_the_run_start_limit(
    stack: SpindleStack, tight_gateway: str, unique: str
) -> None:
    # Every door starts runs through one service (spindle.gateway.services.run_starts):
    # a schedule's trigger and backfill and an MCP tool call are counted like POST /runs.
    admin = await client_of(stack.settings, tight_gateway, f"sched-{unique}", roles=["admin"])
    async with admin:
        spec = example_graph("approval-flow")
        assert (await admin.put(f"/graphs/{spec['name']}", json=spec)).status_code in (200, 201)
        schedule = {
            "id": f"hourly-{unique}",
            "graph": spec["name"],
            "input": {"topic": "limits"},
            "interval_seconds": 3600,
            "paused": True,
        }
        assert (await admin.post("/schedules", json=schedule)).status_code == 201
        url = f"/schedules/{schedule['id']}"
        assert (await admin.post(f"{url}/trigger")).status_code == 202
        assert (await admin.post("/runs", json=start_body())).status_code == 201

        now = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        span = {"start": (now - timedelta(minutes=90)).isoformat(), "end": now.isoformat()}
        throttled(await admin.post(f"{url}/backfill", json=span), "rate_limit_run_starts")
        throttled(await admin.post(f"{url}/trigger"), "rate_limit_run_starts")

        headers = {"Authorization": admin.headers["Authorization"]}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{tight_gateway}/mcp", http_client=http)
            async with Client(transport) as mcp:
                with pytest.raises(MCPError) as refused:
                    await mcp.call_tool(spec["name"], {"topic": "over the limit"})
        assert refused.value.code == types.INTERNAL_ERROR
        assert "rate_limit_run_starts" in refused.value.message
        listed = (await admin.get("/runs", params={"graph": spec["name"]})).json()
        assert listed["total"] <= RUN_STARTS, "no refused start left a run behind"


async def test_a_batch_over_the_cap_is_refused_before_any_member_runs(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    busy, _ = tenants
    at_cap = [
        {"jsonrpc": "2.0", "id": n, "method": "tasks.list", "params": {}} for n in range(BATCH)
    ]
    assert len((await busy.post("/", json=at_cap)).json()) == BATCH
    over = [execute_call(f"o{n}") for n in range(BATCH + 1)]
    reply = (await busy.post("/", json=over)).json()
    assert isinstance(reply, dict), "one error for the whole batch"
    assert reply["error"]["code"] == -32600
    assert "jsonrpc_max_batch" in reply["error"]["data"]["reason"]
    assert (await busy.get("/runs")).json()["total"] == 0


async def test_every_streaming_transport_takes_a_stream_slot(
    tenants: tuple[httpx.AsyncClient, httpx.AsyncClient],
) -> None:
    # Issue 15 (M3): tasks/resubscribe and streaming tasks.execute took no slot.
    busy, _ = tenants
    run = (await busy.post("/runs", json=start_body())).json()
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
    async with open_sse(busy, url) as held:
        assert held.response.status_code == 200
        resubscribe = {
            "jsonrpc": "2.0",
            "id": "r",
            "method": "tasks/resubscribe",
            "params": {"id": run["workflow_id"]},
        }
        for body in (resubscribe, a2a_stream_call("over the cap")):
            refused = await busy.post("/", json=body)
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1
            assert "max_streams_per_tenant" in refused.json()["error"]["message"]
        agui = {"threadId": "t-slots", "runId": "r1", "messages": []}
        throttled(await busy.post("/agui/approval-flow", json=agui), "max_streams_per_tenant")
        streaming = (await busy.post("/", json=execute_call("s", stream=True))).json()
        assert streaming["error"]["code"] == -32005
        assert "max_streams_per_tenant" in streaming["error"]["data"]["detail"]
    assert (await busy.get("/runs")).json()["total"] == 1, "the refused streams started nothing"

    async def slot_free() -> bool:
        async with open_sse(busy, url) as again:
            return again.response.status_code == 200

    await eventually(slot_free, what="the SSE slot is given back", timeout=10, interval=0.1)

    # An A2A stream holds the slot while it is open and gives it back when the client
    # leaves. (Refused while the probe's own stream above is still being let go: the
    # gateway gives a slot back when it notices the client left, not before.)
    async def a2a_stream_holds_the_slot() -> bool:
        async with busy.stream("POST", "/", json=resubscribe) as a2a:
            if a2a.status_code == 429:
                return False
            assert a2a.status_code == 200
            assert a2a.headers["content-type"].startswith("text/event-stream")
            async with open_sse(busy, url) as meanwhile:
                assert meanwhile.response.status_code == 429
            return True

    await eventually(
        a2a_stream_holds_the_slot, what="an A2A stream takes the slot", timeout=10, interval=0.1
    )
    await eventually(
        slot_free, what="the A2A stream's slot is given back", timeout=10, interval=0.1
    )


async def hourly_schedule(client: httpx.AsyncClient, schedule_id: str) -> str:
    spec = example_graph("approval-flow")
    assert (await client.put(f"/graphs/{spec['name']}", json=spec)).status_code in (200, 201)
    schedule = {
        "id": schedule_id,
        "graph": spec["name"],
        "input": {"topic": "limits"},
        "interval_seconds": 3600,
        "paused": True,
    }
    assert (await client.post("/schedules", json=schedule)).status_code == 201
    return f"/schedules/{schedule_id}"


def hourly_span(count: int) -> dict[str, str]:
    """A past span holding exactly ``count`` hourly start times (half an hour of margin)."""
    last = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=5)
    start = last - timedelta(hours=count - 1, minutes=30)
    return {"start": start.isoformat(), "end": (last + timedelta(minutes=30)).isoformat()}


async def test_a_backfill_takes_one_permit_per_run_and_is_capped(
    stack: SpindleStack, tight_gateway: str, unique: str
) -> None:
    # Issue 28 (high): a backfill took one permit (none, before) for span / interval runs.
    owner = await client_of(
        stack.settings, tight_gateway, f"backfill-{unique}", roles=["graph-editor"]
    )
    async with owner:
        url = await hourly_schedule(owner, f"bf-{unique}")
        too_many = await owner.post(f"{url}/backfill", json=hourly_span(RUN_STARTS + 1))
        assert too_many.status_code == 422, too_many.text
        problem = too_many.json()
        assert "rate_limit_run_starts" in problem["detail"]  # the cap that binds here
        assert problem["errors"][0]["rule"] == "max_runs"
        accepted = await owner.post(f"{url}/backfill", json=hourly_span(RUN_STARTS))
        assert accepted.status_code == 202, accepted.text
        assert f"{RUN_STARTS} runs" in accepted.json()["message"]
        # Both permits went to the backfill's runs: nothing is left for POST /runs.
        throttled(await owner.post("/runs", json=start_body()), "rate_limit_run_starts")

        async def started() -> bool:
            return (await owner.get(url)).json()["runs_started"] >= RUN_STARTS

        await eventually(started, what="the backfill's runs", timeout=30, interval=0.2)
        assert (await owner.get(url)).json()["runs_started"] == RUN_STARTS
        # The gateway's permits were prepaid for the runs: the worker takes none again
        # (it would refuse them now), so each runs its graph to the approval it waits on.
        runs = [r["workflow_id"] for r in (await owner.get(url)).json()["recent_runs"]]

        async def waiting() -> bool:
            states = [(await owner.get(f"/runs/{wf}")).json()["status"] for wf in runs]
            assert "failed" not in states, states
            return states == ["paused"] * RUN_STARTS

        await eventually(waiting, what="the backfill's runs at their approval", timeout=30)
        redis = connect_redis(stack.settings.redis_url)
        try:
            kept = [await redis.get(decision_key(f"backfill-{unique}", wf)) for wf in runs]
        finally:
            await redis.aclose()
        assert [int(k or 0) for k in kept] == [2] * RUN_STARTS, "each run used a prepaid permit"


async def test_refused_starts_give_their_permit_back(
    stack: SpindleStack, tight_gateway: str, unique: str
) -> None:
    # Issue 28 (low): starts refused with 422 (or 404) used up the run-start quota.
    client = await client_of(stack.settings, tight_gateway, f"refund-{unique}")
    async with client:
        bad_input = {"graph_spec": example_graph("approval-flow"), "input": {"topic": 7}}
        for _ in range(RUN_STARTS + 1):
            assert (await client.post("/runs", json=bad_input)).status_code == 422
            assert (await client.post("/runs", json={"graph": f"none-{unique}"})).status_code == 404
        for _ in range(RUN_STARTS):
            assert (await client.post("/runs", json=start_body())).status_code == 201
        throttled(await client.post("/runs", json=start_body()), "rate_limit_run_starts")


async def test_an_mcp_call_at_the_stream_cap_starts_no_run(
    stack: SpindleStack, tight_gateway: str, unique: str
) -> None:
    # Issue 28 (low): tools/call started its run, then failed on the stream slot.
    client = await client_of(stack.settings, tight_gateway, f"mcpcap-{unique}", roles=["admin"])
    async with client:
        spec = example_graph("approval-flow")
        assert (await client.put(f"/graphs/{spec['name']}", json=spec)).status_code in (200, 201)
        run = (await client.post("/runs", json=start_body())).json()
        url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
        headers = {"Authorization": client.headers["Authorization"]}
        async with open_sse(client, url) as held:
            assert held.response.status_code == 200
            async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
                transport = streamable_http_client(f"{tight_gateway}/mcp", http_client=http)
                async with Client(transport) as mcp:
                    with pytest.raises(MCPError) as refused:
                        await mcp.call_tool(spec["name"], {"topic": "at the cap"})
        assert "max_streams_per_tenant" in refused.value.message
        assert (await client.get("/runs")).json()["total"] == 1, "the refused call started nothing"
