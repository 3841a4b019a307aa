"""The conversation page's side of a run: workstream cards and folds, the Files
panel (a run's files and artifacts, downloads, uploads and their removal), in
headless Chromium against the browser stack (see ``conftest``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from playwright.async_api import FilePayload, Route, expect

from tests.browser.conftest import OpenPage, start_run
from tests.e2e.conftest import example_graph

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


# Visible controls without an accessible name (label, aria-label or text).
UNNAMED_CONTROLS = """() => [...document.querySelectorAll('button, input, select, textarea, a')]
  .filter((el) => el.offsetParent !== null)
  .filter((el) => !((el.labels && el.labels.length) || el.getAttribute('aria-label')
                    || el.textContent.trim() || el.getAttribute('title')))
  .map((el) => el.outerHTML.slice(0, 80))"""


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
    # The workstream's messages are folded under its card in the conversation.
    chat_fold = page.locator(f"li.ws-fold[data-launch-id='{chat_id}']")
    await chat_fold.locator("summary").click()
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

    # Every control the user can reach has a name a screen reader says.
    unnamed = await page.evaluate(UNNAMED_CONTROLS)
    assert unnamed == [], unnamed

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

    # Send is off while a file is on its way (held here until the test lets it go).
    release = asyncio.Event()

    async def hold(route: Route) -> None:
        if route.request.method == "POST":
            await release.wait()
        await route.continue_()

    await page.route("**/files", hold)
    await page.fill("#message-input", "a message while uploading")
    await picker.set_input_files([text_file("agenda.txt", "1. budget")])
    await expect(page.locator("#upload-state")).to_contain_text("Uploading agenda.txt")
    await expect(page.locator("#send")).to_be_disabled()
    await expect(page.locator("#attach")).to_be_disabled()
    release.set()
    await expect(page.locator("#send")).to_be_enabled()
    await page.unroute("**/files", hold)
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

    # An upload can be removed (DELETE /runs/{id}/files/{name}).
    await page.get_by_role("button", name="Remove agenda.txt").click()
    await expect(page.locator("#files li")).to_have_count(1)
    await expect(page.locator("#files li")).to_contain_text("minutes.md")
    gone = await api.get(f"/runs/{workflow_id}/{run_id}/files/agenda.txt")
    assert gone.status_code == 404
    await api.post(f"/runs/{workflow_id}/cancel")


@pytest.fixture
async def delegation(api: httpx.AsyncClient) -> str:
    """The delegation example, registered before the page loads its graph list."""
    reply = await api.put("/graphs/delegation", json=example_graph("delegation"))
    assert reply.status_code in (200, 201), reply.text
    return "delegation"


# The visible text of the conversation outside the workstreams' folds.
OUTSIDE_FOLDS = """() => [...document.querySelectorAll('#messages > li:not(.ws-fold)')]
  .map((li) => li.innerText).join(' | ')"""


async def test_a_delegation_shows_its_answer_once_and_lists_the_workstreams_files(
    delegation: str, ui: OpenPage, api: httpx.AsyncClient
) -> None:
    page = ui.page
    await page.select_option("#graph-select", delegation)
    # The graph's description is Markdown: `ws-1` is code, not backticks.
    await expect(page.locator("#graph-hint code").first).to_have_text("ws-1")
    assert "`" not in await page.locator("#graph-hint").inner_text()
    await page.fill("#message-input", "tides")
    await page.click("#send")
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "ended")
    workflow_id, run_id = (await page.evaluate("location.hash")).removeprefix("#run=").split("/")

    # The workstream's messages and result are folded under its card.
    fold = page.locator("li.ws-fold[data-launch-id='ws-1']")
    pill = fold.locator("summary .pill")
    await expect(pill).to_have_text("completed")
    box = await pill.bounding_box()
    assert box is not None and box["height"] < 28, box  # a small pill, not a tall blob
    card_state = page.locator(".ws-card[data-launch-id='ws-1'] .ws-state")
    await expect(card_state).to_have_text("completed")
    card_box = await card_state.bounding_box()
    assert card_box is not None and card_box["height"] < 28, card_box
    await expect(fold.locator("li.msg-answer")).to_have_count(1)
    await expect(fold.locator("li.msg-answer")).to_be_hidden()  # folded

    # The lead's final answer (it cites the workstream) is shown once: not again
    # as the output node's ANSWER, nor as the COMPLETE's output.
    updates = (await api.get(f"/runs/{workflow_id}/{run_id}/updates")).json()["messages"]
    final = [m["m"] for m in updates if m["t"] == 7 and "From the workstreams" in m["m"]]
    assert len(final) == 2, final  # the lead's and the output node's, on the stream
    outside = await page.evaluate(OUTSIDE_FOLDS)
    assert outside.count("From the workstreams:") == 1, outside
    assert "\\n" not in outside and '\\"' not in outside
    await expect(page.locator("#messages > li.msg-complete .output-same")).to_be_visible()
    await fold.locator("summary").click()
    await expect(fold.locator("li.msg-answer")).to_be_visible()
    await expect(fold.locator(".ws-fold-result")).to_contain_text("went to the parent")

    # The Files panel lists the run's artifacts, with a download link.
    link = page.locator("#files a", has_text="files/ws-1/result.md")
    await expect(link).to_be_visible()
    async with page.expect_download() as download_info:
        await link.click()
    download = await download_info.value
    assert download.suggested_filename == "result.md"
    saved = Path(await download.path()).read_bytes()
    expected = await api.get(f"/runs/{workflow_id}/{run_id}/files/files/ws-1/result.md")
    assert saved == expected.content
    # Artifacts are not removable from the page; only uploads are.
    await expect(
        page.locator("#files li", has_text="result.md").get_by_role("button")
    ).to_have_count(0)
    await ui.screenshot("conversation-delegation")
