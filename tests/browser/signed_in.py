"""Pages opened by a user of ada's tenant with a key of their own (the inbox and
schedules tests), at a desktop or a phone viewport."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, ViewportSize

from spindle.shared.platform.settings import Settings
from spindle.shared.store.api_keys import ApiKeyStore
from tests.browser.conftest import OpenPage
from tests.e2e.conftest import Caller, SpindleStack

DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}


async def tenant_user(settings: Settings, tenant: str, user: str, roles: list[str]) -> Caller:
    """A key for ``user`` of ``tenant``."""
    store = ApiKeyStore.from_settings(settings)
    try:
        created = await store.create(tenant_id=tenant, user_id=user, roles=roles)
    finally:
        await store.close()
    return Caller(tenant, user, created.key)


@pytest.fixture(scope="session")
async def bob(browser_settings: Settings, browser_user: Caller) -> Caller:
    """bob: ada's tenant, no roles (he answers what is assigned to him)."""
    return await tenant_user(browser_settings, browser_user.tenant, "bob", [])


@asynccontextmanager
async def signed_in(
    chromium: Browser,
    stack: SpindleStack,
    caller: Caller,
    path: str,
    shots: Path,
    viewport: ViewportSize = DESKTOP,
) -> AsyncIterator[OpenPage]:
    """``path`` in a fresh context, the caller's key typed into the header's key field."""
    context = await chromium.new_context(viewport=viewport)
    page: Page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{stack.base_url}{path}")
    await page.locator("body[data-ready=true]").wait_for(state="attached")
    await page.fill("#api-key", caller.key)
    await page.click("#auth-form button[type=submit]")
    shots.mkdir(parents=True, exist_ok=True)
    try:
        yield OpenPage(page, errors, shots)
    finally:
        await context.close()
    assert errors == [], f"the page threw: {errors}"


async def fits_width(page: Page) -> bool:
    """No horizontal scrolling: the page is usable at its viewport's width."""
    return bool(
        await page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth"
        )
    )
