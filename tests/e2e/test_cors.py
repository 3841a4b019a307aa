"""CORS (SPINDLE_CORS_ALLOW_ORIGINS): what a browser on another origin is told.

A gateway of its own lists one origin (served by the e2e stack's worker); the shared
stack keeps the default (no origins), where no CORS header appears at all. Requests
carry ``Origin`` the way a browser does; the browser's verdict follows from the
``Access-Control-*`` headers checked here (docs/streaming/embedding.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from spindle.dev.processes import free_port
from tests.e2e.conftest import Caller, SpindleStack, start_gateway
from tests.e2e.run_driver import T, answer, start
from tests.e2e.sse_client import open_sse

pytestmark = pytest.mark.e2e

LISTED = "https://app.example.com"
UNLISTED = "https://evil.example.net"


def header_list(response: httpx.Response, name: str) -> set[str]:
    """A comma-separated header's values, lower-cased."""
    return {part.strip().lower() for part in response.headers.get(name, "").split(",") if part}


def cors_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}


@pytest.fixture(scope="module")
def cors_gateway(stack: SpindleStack, artifacts_dir: Path) -> Iterator[str]:
    settings = stack.settings.model_copy(
        update={"gateway_port": free_port(), "cors_allow_origins": [LISTED]}
    )
    proc = start_gateway(settings, "cors gateway", artifacts_dir / "e2e")
    yield f"http://127.0.0.1:{settings.gateway_port}"
    proc.stop()


@pytest.fixture
async def alice_there(
    cors_gateway: str, callers: dict[str, Caller]
) -> AsyncIterator[httpx.AsyncClient]:
    """alice on the CORS gateway, from a page of the listed origin."""
    headers = {**callers["alice"].headers, "Origin": LISTED}
    async with httpx.AsyncClient(base_url=cors_gateway, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
async def anonymous_there(cors_gateway: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=cors_gateway, timeout=30) as client:
        yield client


async def test_a_preflight_from_a_listed_origin_is_allowed(
    anonymous_there: httpx.AsyncClient,
) -> None:
    # What the browser asks before the component's POST /runs with a key and JSON.
    reply = await anonymous_there.options(
        "/runs",
        headers={
            "Origin": LISTED,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )
    assert reply.status_code == 200, reply.text
    assert reply.headers["access-control-allow-origin"] == LISTED
    assert {"get", "post", "put", "delete"} <= header_list(reply, "access-control-allow-methods")
    allowed = header_list(reply, "access-control-allow-headers")
    assert {"authorization", "x-api-key", "content-type", "idempotency-key"} <= allowed
    assert {"last-event-id", "accept"} <= allowed
    assert "access-control-allow-credentials" not in reply.headers, "keys are headers, not cookies"
    assert int(reply.headers["access-control-max-age"]) > 0


async def test_a_request_from_a_listed_origin_may_read_the_answer(
    alice_there: httpx.AsyncClient, examples: list[str]
) -> None:
    reply = await alice_there.post(
        "/runs", json={"graph": "approval-flow", "input": {"topic": "cors"}}
    )
    assert reply.status_code == 201, reply.text
    assert reply.headers["access-control-allow-origin"] == LISTED
    assert "origin" in header_list(reply, "vary"), "caches must key the answer on Origin"
    exposed = header_list(reply, "access-control-expose-headers")
    assert {"location", "retry-after", "idempotent-replayed", "etag"} <= exposed
    assert reply.headers["location"].endswith(reply.json()["workflow_id"])
    # A refusal is readable too: the page shows the problem, not a network error.
    refused = await alice_there.get("/runs/run-does-not-exist")
    assert refused.status_code == 404
    assert refused.headers["access-control-allow-origin"] == LISTED


async def test_the_component_script_loads_as_a_cross_origin_module(
    anonymous_there: httpx.AsyncClient,
) -> None:
    # <script type="module"> fetches in CORS mode: the redirect and the module need it.
    moved = await anonymous_there.get("/ui/spindle-conversation.js", headers={"Origin": LISTED})
    assert moved.is_redirect
    assert moved.headers["access-control-allow-origin"] == LISTED
    script = await anonymous_there.get(moved.headers["location"], headers={"Origin": LISTED})
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert script.headers["access-control-allow-origin"] == LISTED


async def test_an_unlisted_origin_gets_no_allow_origin(
    anonymous_there: httpx.AsyncClient, callers: dict[str, Caller]
) -> None:
    preflight = await anonymous_there.options(
        "/runs",
        headers={
            "Origin": UNLISTED,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert preflight.status_code >= 400
    # The server still answers (CORS is the browser's rule), but the browser hides it.
    listed = await anonymous_there.get(
        "/runs", headers={"Origin": UNLISTED, **callers["alice"].headers}
    )
    assert listed.status_code == 200
    assert "access-control-allow-origin" not in listed.headers
    # A preflight asking for a header the gateway does not read is refused as well.
    odd = await anonymous_there.options(
        "/runs",
        headers={
            "Origin": LISTED,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-made-up",
        },
    )
    assert odd.status_code >= 400


async def test_the_default_sends_no_cors_header(
    stack: SpindleStack, callers: dict[str, Caller]
) -> None:
    assert stack.settings.cors_allow_origins == []
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as client:
        listed = await client.get("/runs", headers={"Origin": LISTED, **callers["alice"].headers})
        assert listed.status_code == 200
        assert cors_headers(listed) == {}
        preflight = await client.options(
            "/runs",
            headers={
                "Origin": LISTED,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization",
            },
        )
        assert preflight.status_code != 200
        assert cors_headers(preflight) == {}


async def test_an_sse_stream_from_a_listed_origin_is_allowed_and_live(
    alice_there: httpx.AsyncClient, anonymous_there: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(alice_there, graph="approval-flow", input={"topic": "cors"})
    minted = await alice_there.post(f"/runs/{run['workflow_id']}/stream-token")
    assert minted.headers["access-control-allow-origin"] == LISTED
    token = minted.json()["access_token"]
    # As EventSource sends it: no credentials header, the token in the URL, and Origin.
    async with open_sse(
        anonymous_there,
        run["stream_url"],
        params={"access_token": token},
        headers={"Origin": LISTED},
    ) as sse:
        assert sse.response.status_code == 200
        assert sse.response.headers["access-control-allow-origin"] == LISTED
        assert sse.response.headers["content-type"].startswith("text/event-stream")
        # The ask arrives while the run waits for its answer: streamed, not buffered.
        ask = await sse.until_type(T.REQUEST_INPUT)
        assert ask.json()["d"]["node_id"] == "review"
        reply = await answer(alice_there, run, {"data": {"decision": "approve"}})
        assert reply.status_code == 200, reply.text
        await sse.read_to_end(timeout=60)
    assert sse.ended
    assert sse.events[-1].json()["t"] == T.COMPLETE
