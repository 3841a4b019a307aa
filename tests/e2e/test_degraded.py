"""A gateway whose Temporal and Redis are down still answers: liveness holds,
readiness says what is down, and requests get 503 problems with Retry-After."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from spindle.dev.processes import free_port
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import Caller, start_gateway

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def degraded_gateway(e2e_settings: Settings, artifacts_dir: Path) -> Iterator[str]:
    nothing_there = free_port()
    settings = e2e_settings.model_copy(
        update={
            "temporal_address": f"127.0.0.1:{nothing_there}",
            "redis_url": f"redis://127.0.0.1:{nothing_there}/0",
            "gateway_port": free_port(),
        }
    )
    proc = start_gateway(settings, "degraded gateway", artifacts_dir / "e2e")
    base = f"http://127.0.0.1:{settings.gateway_port}"
    yield base
    proc.stop()


@pytest.fixture
async def degraded(
    degraded_gateway: str, callers: dict[str, Caller]
) -> AsyncIterator[httpx.AsyncClient]:
    headers = callers["alice"].headers
    async with httpx.AsyncClient(base_url=degraded_gateway, timeout=30, headers=headers) as client:
        yield client


def unavailable(reply: httpx.Response) -> None:
    assert reply.status_code == 503, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert int(reply.headers["retry-after"]) > 0
    assert reply.json()["title"] == "Service unavailable"


async def test_readiness_names_what_is_down(degraded: httpx.AsyncClient) -> None:
    assert (await degraded.get("/healthz")).status_code == 200
    ready = await degraded.get("/readyz")
    assert ready.status_code == 503
    assert "retry-after" in ready.headers
    checks = ready.json()["checks"]
    assert not checks["temporal"]["ok"] and checks["temporal"]["detail"]
    assert not checks["redis"]["ok"]
    assert checks["mongo"]["ok"]


async def test_requests_get_503_with_retry_after(degraded: httpx.AsyncClient) -> None:
    spec = {
        "name": "degraded-probe",
        "entry": "a",
        # Valid whether or not this gateway has the workers' catalog yet.
        "nodes": [
            {"id": "a", "type": "tool", "params": {"tool": "word_count", "args": {"text": "x"}}}
        ],
    }
    unavailable(await degraded.post("/runs", json={"graph_spec": spec}))
    unavailable(await degraded.get("/runs/run-x/r/updates"))
    unavailable(await degraded.get("/runs/run-x/r/stream"))
    unavailable(await degraded.get("/runs/run-x"))
    listed = await degraded.post("/runs/run-x/r/signal/UserInput", json={"message": "hi"})
    unavailable(listed)
