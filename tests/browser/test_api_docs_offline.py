"""``/docs`` (Swagger UI) and ``/redoc`` render with every non-loopback request blocked.

An air-gapped user must see the API docs: the pages load Swagger UI, ReDoc and the
favicon from the gateway itself (gateway/api/routes/api_docs.py), never a CDN.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.async_api import Browser, Page, Route, expect

from tests.e2e.conftest import SpindleStack

pytestmark = pytest.mark.e2e

LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


class OfflinePage:
    """A page whose requests outside loopback are aborted and recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.blocked: list[str] = []
        self.errors: list[str] = []
        self.served: list[str] = []

    async def guard(self, route: Route) -> None:
        url = route.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("data:", "blob:")) or host in LOOPBACK:
            self.served.append(url)
            await route.continue_()
        else:
            self.blocked.append(url)
            await route.abort("internetdisconnected")


@pytest.fixture
async def offline(chromium: Browser, artifacts_dir: Path) -> AsyncIterator[OfflinePage]:
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(20_000)
    held = OfflinePage(page)
    await context.route("**/*", held.guard)
    page.on("pageerror", lambda exc: held.errors.append(str(exc)))
    try:
        yield held
    finally:
        shots = artifacts_dir / "browser"
        shots.mkdir(parents=True, exist_ok=True)
        await page.screenshot(path=str(shots / f"api-docs-{len(held.served)}.png"))
        await context.close()


async def _operations(stack: SpindleStack) -> set[str]:
    """Every ``METHOD path`` of the gateway's OpenAPI document."""
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=10.0) as client:
        spec = (await client.get("/openapi.json")).json()
    return {f"{method.upper()} {path}" for path, ops in spec["paths"].items() for method in ops}


# Swagger UI shows an operation once per tag: the distinct (method, path) pairs shown.
SHOWN_OPERATIONS = """() => [...document.querySelectorAll('.opblock-summary')].map(s =>
  s.querySelector('.opblock-summary-method').textContent.trim() + ' ' +
  s.querySelector('.opblock-summary-path').getAttribute('data-path'))"""


async def test_swagger_ui_renders_every_operation_offline(
    browser_stack: SpindleStack, offline: OfflinePage
) -> None:
    page = offline.page
    await page.goto(f"{browser_stack.base_url}/docs")
    operations = page.locator(".opblock")
    await expect(operations.first).to_be_visible()
    await expect(page.locator(".opblock-summary-path").first).to_contain_text("/")
    expected = await _operations(browser_stack)
    assert len(expected) > 20
    shown = set(await page.evaluate(SHOWN_OPERATIONS))
    assert shown == expected
    assert await page.locator(".info .title").inner_text() != ""
    # the favicon and every asset came from the gateway
    assert any(url.endswith("/docs/assets/swagger-ui-bundle.js") for url in offline.served)
    assert any(url.endswith("/docs/assets/favicon.png") for url in offline.served)
    assert offline.blocked == [], f"/docs reached outside: {offline.blocked}"
    assert offline.errors == []


async def test_redoc_renders_operations_offline(
    browser_stack: SpindleStack, offline: OfflinePage
) -> None:
    page = offline.page
    reply = await page.goto(f"{browser_stack.base_url}/redoc")
    assert reply is not None
    assert "img-src 'self' data:" in reply.headers["content-security-policy"]
    # ReDoc lists each operation in its side menu and renders its heading
    await expect(page.locator("[role=menuitem]").first).to_be_visible()
    await expect(
        page.locator("h2").filter(has_text="Validate a graph and its input, then start a run").first
    ).to_be_attached()
    assert await page.locator("[role=menuitem]").count() > 20
    assert any(url.endswith("/docs/assets/redoc.standalone.js") for url in offline.served)
    # ReDoc's bundle links Redocly's logo on a CDN: the page's policy keeps the
    # browser from asking for it, so nothing reaches the route guard either.
    assert offline.blocked == [], f"/redoc reached outside: {offline.blocked}"
    assert offline.errors == []
