"""The header every page shares (docs/streaming/web-page.md): the same page links, in
the same order, on each page with the current one marked (``aria-current="page"``),
and the key field, whose key, given once, holds for every page opened in the tab.
Headless Chromium against the browser stack."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, expect

from tests.e2e.conftest import Caller, SpindleStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

LINKS = ["Conversation", "Runs", "Inbox", "Schedules", "Evaluations"]
PATHS = ["/ui/", "/ui/runs", "/ui/inbox", "/ui/schedules", "/ui/evaluations"]
# Each page, the link marked current on it (None: a page not among the links), and
# whether it has the key field (the embedding example's components use the tab's key).
PAGES: list[tuple[str, str | None, bool]] = [
    *((path, link, True) for path, link in zip(PATHS, LINKS, strict=True)),
    ("/ui/compare", None, True),
    ("/ui/embed-example.html", None, False),
]


async def test_every_page_shows_the_same_links_with_its_own_marked(
    chromium: Browser, browser_stack: SpindleStack, browser_user: Caller
) -> None:
    context = await chromium.new_context(viewport={"width": 1280, "height": 800})
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        await page.goto(f"{browser_stack.base_url}/ui/")
        await page.get_by_label("API key").fill(browser_user.key)
        await page.get_by_role("button", name="Use key").click()
        await expect(page.locator("#auth-state")).to_have_text("Key set for this tab.")
        for path, current, has_key in PAGES:
            await page.goto(f"{browser_stack.base_url}{path}")
            links = page.get_by_role("navigation", name="Pages").get_by_role("link")
            await expect(links).to_have_text(LINKS)
            hrefs = await links.evaluate_all("all => all.map((a) => new URL(a.href).pathname)")
            assert hrefs == PATHS, path
            marked = page.locator(".page-links a[aria-current=page]")
            await expect(marked).to_have_text([current] if current else [])
            # The key field: on every page that calls the API, with the tab's key kept.
            state = page.locator("#auth-form #auth-state")
            if has_key:
                await expect(page.get_by_label("API key")).to_be_visible()
                await expect(state).to_have_text("Key set for this tab.")
            else:
                await expect(state).to_have_count(0)
    finally:
        await context.close()
    assert errors == [], f"a page threw: {errors}"
