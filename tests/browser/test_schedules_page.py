"""The schedules page (``/ui/schedules``): a schedule created from a graph with an
interval, shown with its spec and next runs, paused (no next runs shown), resumed,
triggered (its run listed and linked), refused to another user with the problem's
text, and deleted after a confirmation; at a desktop and a phone width. Headless
Chromium against the browser stack."""

from __future__ import annotations

import uuid
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from tests.browser.signed_in import PHONE, bob, fits_width, signed_in
from tests.e2e.conftest import Caller, SpindleStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
__all__ = ["bob"]  # the fixture, imported for pytest
SAFE = "-_.!~*'()"  # what encodeURIComponent leaves as it is


async def test_create_pause_resume_trigger_and_delete_a_schedule(
    chromium: Browser,
    browser_stack: SpindleStack,
    api: httpx.AsyncClient,
    browser_user: Caller,
    bob: Caller,
    artifacts_dir: Path,
) -> None:
    schedule_id = f"digest-{uuid.uuid4().hex[:6]}"
    shots = artifacts_dir / "browser"
    async with signed_in(chromium, browser_stack, browser_user, "/ui/schedules", shots) as ui:
        page = ui.page
        await expect(page.locator(".page-links a[aria-current=page]")).to_have_text("Schedules")
        card = await create(page, schedule_id)
        await expect(card.locator(".state-badge")).to_have_text("active")
        for shown in ("every 2 hours", "ui-chat", "morning digest", "What changed overnight?"):
            await expect(card).to_contain_text(shown)
        await expect(card.locator(".next-runs li")).not_to_have_count(0)
        await expect(card.locator(".recent-runs")).to_have_text("none yet")
        await ui.screenshot("schedules-created")

        # Paused: no next runs, on the page and over the API.
        await card.get_by_role("button", name=f"Pause {schedule_id}").click()
        await expect(card.locator(".state-badge")).to_have_text("paused")
        await expect(card.locator(".next-runs")).to_have_text("none while paused")
        described = (await api.get(f"/schedules/{schedule_id}")).json()
        assert described["paused"] is True and described["next_runs"] == []
        await ui.screenshot("schedules-paused")

        # Resumed: the next runs are back; the note stayed the schedule's own.
        await card.get_by_role("button", name=f"Resume {schedule_id}").click()
        await expect(card.locator(".state-badge")).to_have_text("active")
        await expect(card.locator(".next-runs li")).not_to_have_count(0)
        await expect(card).to_contain_text("morning digest")

        # Triggered: its run appears under recent runs, linked to the runs page.
        await card.get_by_role("button", name=f"Trigger {schedule_id} now").click()
        await expect(page.locator("#list-notice")).to_have_text(
            f"{schedule_id}: a run is being started."
        )
        run_link = card.locator(".recent-runs a")
        await expect(run_link).to_have_count(1, timeout=30_000)
        [started] = (await api.get(f"/schedules/{schedule_id}")).json()["recent_runs"]
        href = f"/ui/runs#run={quote(started['workflow_id'], safe=SAFE)}"
        await expect(run_link).to_have_attribute("href", href)
        await expect(card.locator(".schedule-spec")).to_contain_text("Runs started1")
        assert await fits_width(page)

        await refused_to(chromium, browser_stack, bob, shots, schedule_id)
        await at_phone_width(chromium, browser_stack, browser_user, shots, schedule_id)
        await delete_after_confirmation(page, card, schedule_id)
        assert (await api.get(f"/schedules/{schedule_id}")).status_code == 404


async def create(page: Page, schedule_id: str) -> Locator:
    """Fill in the form: ui-chat every 2 hours, with an input and a note; the new card."""
    await page.locator("#new-graph option[value='ui-chat']").wait_for(state="attached")
    await page.get_by_label("Graph").select_option("ui-chat")
    await page.get_by_label("Id").fill(schedule_id)
    # A refused form shows the problem's text and each error with its field.
    await page.get_by_label("Cron", exact=True).check()
    await page.get_by_label("Cron expression").fill("every morning")
    await page.get_by_role("button", name="Create schedule").click()
    await expect(page.locator("#create-errors")).to_contain_text(
        "cron: Value error, a cron expression has 5 fields"
    )
    await page.get_by_label("Every").check()
    await page.get_by_label("Interval").fill("2")
    await page.get_by_label("Unit").select_option(label="hours")
    await page.get_by_label("Input").fill('{"question": "What changed overnight?"}')
    await page.get_by_label("Note").fill("morning digest")
    await page.get_by_role("button", name="Create schedule").click()
    card = page.locator("#schedules > li").filter(has=page.get_by_role("heading", name=schedule_id))
    await expect(card).to_have_count(1)
    await expect(page.locator("#list-notice")).to_have_text(f"Schedule {schedule_id} created.")
    return card


async def refused_to(
    chromium: Browser, stack: SpindleStack, bob: Caller, shots: Path, schedule_id: str
) -> None:
    """bob, of the same tenant, may read the schedule but not pause it: the 403's text."""
    async with signed_in(chromium, stack, bob, "/ui/schedules", shots) as other:
        theirs = other.page.locator("#schedules > li").filter(
            has=other.page.get_by_role("heading", name=schedule_id)
        )
        await theirs.get_by_role("button", name=f"Pause {schedule_id}").click()
        await expect(theirs.get_by_role("alert")).to_contain_text(
            "only the schedule's owner or a user with role admin or schedule-admin "
            f"may change schedule '{schedule_id}'"
        )
        await expect(theirs.locator(".state-badge")).to_have_text("active")


async def at_phone_width(
    chromium: Browser, stack: SpindleStack, user: Caller, shots: Path, schedule_id: str
) -> None:
    """The card and the form stack at a phone's width; nothing scrolls sideways."""
    async with signed_in(chromium, stack, user, "/ui/schedules", shots, PHONE) as phone:
        await expect(phone.page.get_by_role("heading", name=schedule_id)).to_be_visible()
        await expect(phone.page.get_by_role("button", name="Create schedule")).to_be_visible()
        assert await fits_width(phone.page)
        await phone.screenshot("schedules-phone")


async def delete_after_confirmation(page: Page, card: Locator, schedule_id: str) -> None:
    """Delete… asks first (Cancel, focused, dismisses by keyboard); Delete removes it."""
    await card.get_by_role("button", name=f"Delete {schedule_id}").click()
    confirm = card.get_by_role("group", name=f"Confirm deleting {schedule_id}")
    await expect(confirm).to_be_visible()
    await expect(confirm.get_by_role("button", name="Cancel")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(confirm).to_be_hidden()
    await card.get_by_role("button", name=f"Delete {schedule_id}").click()
    await confirm.get_by_role("button", name="Delete", exact=True).click()
    await expect(card).to_have_count(0)
    await expect(page.locator("#list-notice")).to_have_text(f"Schedule {schedule_id} deleted.")
