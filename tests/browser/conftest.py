"""Browser fixtures: the conversation page in headless Chromium, against a real stack.

Debian's ``chromium`` (installed by ``.ci/setup``) is driven by Playwright's async
API (its sync API cannot run inside the tests' asyncio loop); nothing is
downloaded: Playwright only connects to ``/usr/bin/chromium``.

The stack is a worker and a gateway subprocess of their own (task queue
``spindle-browser``, database ``spindle_browser``), started once per session,
with auth ON and a real API key: the page is used as a person would, key typed
into its key field. The offline model pauses 20 ms per token so that streamed
tokens arrive as many STREAMING_CHUNK messages, and the page's upload settings
are narrowed so the tests can see them enforced.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect
from temporalio.client import Client

from spindle.dev.processes import free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.browser.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.e2e.conftest import Caller, SpindleStack, running_stack

TOKEN_DELAY_MS = 20
# Assertions wait for the page up to this long (Playwright's default is 5 s; the
# machine may be shared with other work).
expect.set_options(timeout=15_000)
UPLOAD_ACCEPT = ".txt,.md"
UPLOAD_MAX_FILES = 2

# An agent answers (its tokens stream), a person rates the answer through a
# form with an enum, an integer, a boolean and a bounded string, and the output
# node reports the rating.
UI_CHAT_GRAPH: dict[str, Any] = {
    "name": "ui-chat",
    "description": "An agent answers; a person rates the answer.",
    "entry": "assistant",
    "input_schema": {
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1, "title": "Question"}},
        "required": ["question"],
    },
    "nodes": [
        {"id": "assistant", "type": "agent", "params": {"prompt": "{{ input.question }}"}},
        {
            "id": "rate",
            "type": "prompt",
            "params": {
                "title": "Rate the answer",
                "prompt": "How good was the answer?",
                "ui_schema": {
                    "type": "object",
                    "properties": {
                        "verdict": {
                            "type": "string",
                            "enum": ["useful", "not useful"],
                            "title": "Verdict",
                        },
                        "score": {"type": "integer", "minimum": 1, "maximum": 5, "title": "Score"},
                        "follow_up": {"type": "boolean", "title": "Follow up"},
                        "comment": {"type": "string", "maxLength": 40, "title": "Comment"},
                    },
                    "required": ["verdict", "score"],
                },
            },
        },
        {
            "id": "result",
            "type": "output",
            "params": {"select": "rate", "message": "Rated {{ rate.verdict }}"},
        },
    ],
    "edges": [{"from": "assistant", "to": "rate"}, {"from": "rate", "to": "result"}],
}


@pytest.fixture(scope="session")
def browser_settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "task_queue": "spindle-browser",
            "mongo_db": "spindle_browser",
            "gateway_host": "127.0.0.1",
            "gateway_port": free_port(),
            "sse_keepalive_seconds": 1.0,
            "auth_disabled": False,
            "auth_secret": secrets.token_urlsafe(32),
            "api_key_cache_seconds": 0.5,
            "max_upload_bytes": 1_048_576,
            "rate_limit_run_starts": 100_000,
            "rate_limit_signals": 100_000,
            "max_streams_per_tenant": 10_000,
            # This worker shares Redis, and so the push outbox, with the e2e stack's:
            # it must deliver the e2e receivers' pushes (127.0.0.1) as that one does.
            "outbound_allow": "127.0.0.1/32",
        }
    )


@pytest.fixture(scope="session")
async def browser_stack(
    browser_settings: Settings, temporal_client: Client, artifacts_dir: Path
) -> AsyncIterator[SpindleStack]:
    extra_env = {
        "SPINDLE_OFFLINE_TOKEN_DELAY_MS": str(TOKEN_DELAY_MS),
        "SPINDLE_UI_UPLOAD_ACCEPT": UPLOAD_ACCEPT,
        "SPINDLE_UI_UPLOAD_MAX_FILES": str(UPLOAD_MAX_FILES),
    }
    logs = artifacts_dir / "browser"
    async with running_stack(
        browser_settings, temporal_client, logs, extra_env=extra_env
    ) as running:
        yield running


@pytest.fixture(scope="session")
async def browser_user(browser_settings: Settings) -> Caller:
    """ada, of a tenant of her own, with a real API key."""
    store = ApiKeyStore.from_settings(browser_settings)
    try:
        tenant = f"tenant-ui-{uuid.uuid4().hex[:6]}"
        # graph-editor: she registers the ui-chat graph (graph_write_roles).
        created = await store.create(tenant_id=tenant, user_id="ada", roles=["graph-editor"])
    finally:
        await store.close()
    return Caller(tenant, "ada", created.key)


@pytest.fixture(scope="session")
async def api(
    browser_stack: SpindleStack, browser_user: Caller
) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway as ada, with the ui-chat graph registered."""
    async with httpx.AsyncClient(
        base_url=browser_stack.base_url, headers=browser_user.headers, timeout=30.0
    ) as client:
        reply = await client.put(f"/graphs/{UI_CHAT_GRAPH['name']}", json=UI_CHAT_GRAPH)
        assert reply.status_code in (200, 201), reply.text
        yield client


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run .ci/setup (it installs Debian's chromium)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS
        )
        yield browser
        await browser.close()


@dataclass
class OpenPage:
    """The conversation page in a fresh browser context, signed in with a key."""

    page: Page
    errors: list[str]
    shots: Path

    async def screenshot(self, name: str) -> None:
        await self.page.screenshot(path=str(self.shots / f"{name}.png"), full_page=True)


@pytest.fixture
async def ui(
    chromium: Browser,
    browser_stack: SpindleStack,
    browser_user: Caller,
    api: httpx.AsyncClient,
    artifacts_dir: Path,
) -> AsyncIterator[OpenPage]:
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{browser_stack.base_url}/ui/")
    await page.fill("#api-key", browser_user.key)
    await page.click("#auth-form button[type=submit]")
    await page.locator("#graph-select option[value='ui-chat']").wait_for(state="attached")
    shots = artifacts_dir / "browser"
    shots.mkdir(parents=True, exist_ok=True)
    try:
        yield OpenPage(page, errors, shots)
    finally:
        await context.close()
    assert errors == [], f"the page threw: {errors}"


async def start_run(page: Page, question: str) -> tuple[str, str]:
    """Start a ui-chat run from the message box; its (workflow id, run id) once live."""
    await page.select_option("#graph-select", "ui-chat")
    await page.fill("#message-input", question)
    await page.click("#send")
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "live")
    hash_ = await page.evaluate("location.hash")
    workflow_id, run_id = hash_.removeprefix("#run=").split("/", 1)
    return workflow_id, run_id


@pytest.fixture
async def bus(browser_settings: Settings) -> AsyncIterator[MessageBus]:
    """The stack's message bus, to post what only a model would write."""
    bus = MessageBus.from_settings(browser_settings)
    yield bus
    await bus.close()
