"""Per-tenant limits over HTTP: run starts and signals per minute (429 with
Retry-After), concurrent SSE streams. A gateway of its own with tight limits,
served by the e2e stack's worker; other tenants are not affected."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from spindle.dev.processes import free_port
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.e2e.conftest import SpindleStack, example_graph, start_gateway
from tests.e2e.run_driver import wait_for_status
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e

RUN_STARTS, SIGNALS, STREAMS = 2, 3, 1


@pytest.fixture(scope="module")
def tight_gateway(stack: SpindleStack, artifacts_dir: Path) -> Iterator[str]:
    settings = stack.settings.model_copy(
        update={
            "gateway_port": free_port(),
            "rate_limit_run_starts": RUN_STARTS,
            "rate_limit_signals": SIGNALS,
            "max_streams_per_tenant": STREAMS,
        }
    )
    proc = start_gateway(settings, "tight gateway", artifacts_dir / "e2e")
    base = f"http://127.0.0.1:{settings.gateway_port}"
    yield base
    proc.stop()


async def client_of(settings: Settings, base: str, tenant: str) -> httpx.AsyncClient:
    keys = ApiKeyStore.from_settings(settings)
    try:
        created = await keys.create(tenant_id=tenant, user_id="user")
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
