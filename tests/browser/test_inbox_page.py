"""The inbox page (``/ui/inbox``): the prompts a user may answer across runs, each
with its run, graph, node and question, answered in place with the prompt's form,
gone once answered, and the list following new prompts without a reload; at a
desktop and a phone width. Headless Chromium against the browser stack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from tests.browser.signed_in import PHONE, bob, fits_width, signed_in
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.run_driver import start, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
__all__ = ["bob"]  # the fixture, imported for pytest

GRAPH = "ui-assigned"
ASSIGNED: dict[str, Any] = {
    "name": GRAPH,
    "description": "A release waits for bob's approval.",
    "entry": "review",
    "input_schema": {
        "type": "object",
        "properties": {"topic": {"type": "string"}},
        "required": ["topic"],
    },
    "nodes": [
        {
            "id": "review",
            "type": "prompt",
            "params": {
                "title": "Approve the release",
                "prompt": "Ship {{ input.topic }}?",
                "ui_schema": {
                    "type": "object",
                    "properties": {
                        "decision": {"type": "string", "enum": ["approve", "reject"]},
                    },
                    "required": ["decision"],
                },
                "assignees": ["bob"],
            },
        },
        {
            "id": "result",
            "type": "output",
            "params": {"select": "review", "message": "Decided {{ review.decision }}"},
        },
    ],
    "edges": [{"from": "review", "to": "result"}],
}


async def test_assigned_prompts_from_two_runs_answered_in_place(
    chromium: Browser,
    browser_stack: SpindleStack,
    api: httpx.AsyncClient,
    bob: Caller,
    artifacts_dir: Path,
) -> None:
    registered = await api.put(f"/graphs/{GRAPH}", json=ASSIGNED)
    assert registered.status_code in (200, 201), registered.text
    # ada starts two runs; their prompts are bob's to answer.
    first = await start(api, graph=GRAPH, input={"topic": "v1.2"})
    second = await start(api, graph=GRAPH, input={"topic": "v1.3"})
    for run in (first, second):
        await wait_for_status(api, run["workflow_id"], {"paused"})

    shots = artifacts_dir / "browser"
    async with signed_in(chromium, browser_stack, bob, "/ui/inbox", shots) as ui:
        page = ui.page
        await expect(page.locator(".page-links a[aria-current=page]")).to_have_text("Inbox")
        items = page.locator("#inbox-items > li")
        one = items.filter(has_text=first["workflow_id"])
        two = items.filter(has_text=second["workflow_id"])
        await expect(one).to_have_count(1)
        await expect(two).to_have_count(1)
        for entry, topic in ((one, "v1.2"), (two, "v1.3")):
            await expect(entry.locator("h3")).to_have_text("Approve the release")
            await expect(entry).to_contain_text(f"Ship {topic}?")
            await expect(entry).to_contain_text(GRAPH)
            await expect(entry).to_contain_text("review")
            # The form is labelled: its control found by the label a person reads.
            await expect(entry.get_by_label("decision")).to_be_visible()
        run_link = one.get_by_role("link", name=first["workflow_id"])
        await expect(run_link).to_have_attribute("href", f"/ui/runs#run={first['workflow_id']}")
        await expect(page.locator("#inbox-count")).to_have_text("2 waiting")
        await ui.screenshot("inbox-two-prompts")

        # Answered in place with the mouse: gone from the list, the run goes on.
        await one.get_by_label("decision").select_option(label="approve")
        await one.get_by_role("button", name="Send answer").click()
        await expect(one).to_have_count(0)
        await expect(page.locator("#inbox-notice")).to_contain_text(
            f"Answer sent to run {first['workflow_id']}"
        )
        finished = await wait_for_status(api, first["workflow_id"], {"completed"})
        assert finished["output"]["decision"] == "approve"

        # A new prompt appears without a reload (the page polls GET /inbox).
        third = await start(api, graph=GRAPH, input={"topic": "v2.0"})
        await expect(items.filter(has_text=third["workflow_id"])).to_have_count(1)
        await expect(items).to_have_count(2)

        await answer_by_keyboard(page, two)
        rejected = await wait_for_status(api, second["workflow_id"], {"completed"})
        assert rejected["output"]["decision"] == "reject"
        await expect(items).to_have_count(1)
        assert await fits_width(page)

    await answer_at_phone_width(chromium, browser_stack, bob, shots, third["workflow_id"])
    await wait_for_status(api, third["workflow_id"], {"completed"})


async def answer_by_keyboard(page: Page, entry: Locator) -> None:
    """Choose "reject" with the arrow keys, Tab to the button, Enter: the entry leaves."""
    control = entry.get_by_label("decision")
    await control.focus()
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("ArrowDown")
    await expect(control).to_have_value("1")  # "reject"
    await page.keyboard.press("Tab")
    await expect(entry.get_by_role("button", name="Send answer")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(entry).to_have_count(0)


async def answer_at_phone_width(
    chromium: Browser, stack: SpindleStack, bob: Caller, shots: Path, workflow_id: str
) -> None:
    """At a phone's width the entry and its form fit without sideways scrolling."""
    async with signed_in(chromium, stack, bob, "/ui/inbox", shots, PHONE) as phone:
        entry = phone.page.locator("#inbox-items > li").filter(has_text=workflow_id)
        await expect(entry.get_by_role("button", name="Send answer")).to_be_visible()
        assert await fits_width(phone.page)
        await phone.screenshot("inbox-phone")
        await entry.get_by_label("decision").select_option(label="approve")
        await entry.get_by_role("button", name="Send answer").click()
        await expect(entry).to_have_count(0)
        await expect(phone.page.locator("#inbox-empty")).to_be_visible()


async def test_the_inbox_and_schedules_pages_are_served_like_the_others(
    browser_stack: SpindleStack,
) -> None:
    """No credentials needed for the pages themselves; the same strict headers."""
    async with httpx.AsyncClient(base_url=browser_stack.base_url, timeout=10.0) as anonymous:
        for path, module in (("/ui/inbox", "inbox.js"), ("/ui/schedules", "schedules.js")):
            page = await anonymous.get(path)
            assert page.status_code == 200, path
            assert page.headers["content-type"].startswith("text/html")
            assert "script-src 'self'" in page.headers["content-security-policy"]
            assert f'src="/ui/assets/{module}"' in page.text
            for asset in (module, "nav.js", "nav.css", "schema_form.js"):
                served = await anonymous.get(f"/ui/assets/{asset}")
                assert served.status_code == 200, asset
