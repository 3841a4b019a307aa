"""The conversation page's side of a run: workstream cards and file uploads,
in headless Chromium against the browser stack (see ``conftest``)."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import FilePayload, expect

from tests.browser.conftest import OpenPage, start_run

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_workstreams_show_in_a_panel_and_can_be_steered_and_stopped(
    ui: OpenPage, api: httpx.AsyncClient
) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Plan the launch")
    await page.locator("li.msg-request-input form").wait_for()
    quick = await api.post(
        f"/runs/{workflow_id}/workstreams",
        json={"task": "List three risks", "deadline_seconds": 120, "label": "risks"},
    )
    assert quick.status_code == 202, quick.text
    chat = await api.post(
        f"/runs/{workflow_id}/workstreams",
        json={"task": "Stay and answer questions", "interactive": True},
    )
    assert chat.status_code == 202, chat.text
    quick_id, chat_id = quick.json()["launch_id"], chat.json()["launch_id"]

    quick_card = page.locator(f".ws-card[data-launch-id='{quick_id}']")
    await expect(quick_card.locator(".ws-title")).to_have_text(f"risks ({quick_id})")
    await expect(quick_card.locator(".ws-state")).to_have_text("completed")
    await expect(quick_card.locator(".ws-deadline")).to_be_visible()
    await expect(quick_card.locator(".ws-deadline-text")).to_contain_text("of 120 s deadline")
    await expect(quick_card.locator(".ws-controls")).to_be_hidden()

    chat_card = page.locator(f".ws-card[data-launch-id='{chat_id}']")
    await expect(chat_card.locator(".ws-phase")).to_contain_text("phase blocked")
    await expect(chat_card.locator(".ws-deadline-text")).to_have_text("no deadline (interactive)")
    await chat_card.locator(".ws-command").select_option("add_instruction")
    await chat_card.locator(".ws-text").fill("Answer in French")
    await chat_card.get_by_role("button", name="Steer").click()
    ack = page.locator(f"li.msg-system[data-w='{chat_id}']", has_text="applied").filter(
        has_text="steer"
    )
    await expect(ack).to_be_visible()

    # An interactive workstream takes a follow-up message and answers it.
    answers = page.locator(f"li.msg-answer[data-w='{chat_id}']")
    await expect(answers).to_have_count(1)
    await chat_card.locator(".ws-command").select_option("message")
    await chat_card.locator(".ws-text").fill("And the budget?")
    await chat_card.get_by_role("button", name="Send").click()
    # The gateway took the message (a refused one shows its problem on the card).
    await expect(chat_card.locator(".ws-text")).to_have_value("")
    await expect(chat_card.locator(".inline-error")).to_be_hidden()
    await expect(answers).to_have_count(2)
    await expect(answers.last).to_contain_text("And the budget?")

    # The tab of a workstream shows its messages only.
    await page.locator(f"#ws-tabs .tab[data-workstream='{chat_id}']").click()
    await expect(page.locator("li.msg-request-input")).to_be_hidden()
    await expect(ack).to_be_visible()
    await ui.screenshot("conversation-workstreams")
    await page.locator("#ws-tabs .tab[data-workstream='all']").click()
    await expect(page.locator("li.msg-request-input")).to_be_visible()

    await chat_card.get_by_role("button", name="Terminate").click()
    await expect(chat_card.locator(".ws-state")).to_have_text("canceled")
    await expect(chat_card.locator(".ws-controls")).to_be_hidden()
    await api.post(f"/runs/{workflow_id}/cancel")


async def test_files_upload_by_button_and_by_drop_within_the_settings(
    ui: OpenPage, api: httpx.AsyncClient
) -> None:
    page = ui.page
    workflow_id, run_id = await start_run(page, "Read my notes")
    await page.locator("li.msg-request-input form").wait_for()
    picker = page.locator("#file-input")
    error = page.locator("#composer-error")

    def text_file(name: str, body: str = "notes") -> FilePayload:
        return {"name": name, "mimeType": "text/plain", "buffer": body.encode()}

    # UPLOAD_MAX_FILES is 2 and UPLOAD_ACCEPT ".txt,.md" in the browser stack.
    await picker.set_input_files([text_file(f"n{i}.txt") for i in range(3)])
    await expect(error).to_have_text("At most 2 files at a time (got 3).")
    photo: FilePayload = {"name": "photo.png", "mimeType": "image/png", "buffer": b"\x89PNG"}
    await picker.set_input_files([photo])
    await expect(error).to_contain_text("photo.png: not an accepted type")

    await picker.set_input_files([text_file("agenda.txt", "1. budget")])
    await expect(page.locator("#files li")).to_have_count(1)
    await expect(page.locator("#files li")).to_contain_text("agenda.txt")
    await page.evaluate(
        """() => {
          const data = new DataTransfer();
          data.items.add(new File(['# minutes'], 'minutes.md', {type: 'text/markdown'}));
          document.getElementById('drop-zone').dispatchEvent(
            new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));
        }"""
    )
    await expect(page.locator("#files li")).to_have_count(2)
    await expect(page.locator("#upload-state")).to_have_text("1 file uploaded.")
    stored = (await api.get(f"/runs/{workflow_id}/{run_id}/files")).json()
    names = {item["name"] for item in stored["files"]}
    assert {"agenda.txt", "minutes.md"} <= names, stored
    content = await api.get(f"/runs/{workflow_id}/{run_id}/files/minutes.md")
    assert content.text == "# minutes"
    await api.post(f"/runs/{workflow_id}/cancel")
