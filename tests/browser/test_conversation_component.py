"""The embeddable ``<spindle-conversation>`` on its example page (``/ui/embed-example.html``),
in headless Chromium against the browser stack: it starts a run of the ``chat`` example,
sends messages carrying the page's metadata (checked over REST in the run's QUESTION
echoes), a second element shows the same run read-only with its input hidden, and the
close button fires ``spindle-close``; an element made by script reads the run with its
own ``api-base`` and ``api-key`` (docs/streaming/embedding.md)."""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.conftest import OpenPage
from tests.e2e.conftest import Caller, SpindleStack, example_graph

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture
async def chat_example(api: httpx.AsyncClient) -> str:
    reply = await api.put("/graphs/chat", json=example_graph("chat"))
    assert reply.status_code in (200, 201), reply.text
    return "chat"


async def test_the_component_starts_a_run_sends_metadata_and_closes(
    chat_example: str,
    ui: OpenPage,
    api: httpx.AsyncClient,
    browser_stack: SpindleStack,
    browser_user: Caller,
) -> None:
    page = ui.page
    # The key typed on the conversation page stays in this tab: the example uses it.
    await page.goto(f"{browser_stack.base_url}/ui/embed-example.html")
    await page.evaluate(
        """() => { window.__closed = 0;
                   document.addEventListener('spindle-close', () => window.__closed += 1); }"""
    )
    chat = page.locator("#chat-box")
    watch = page.locator("#watch-box")
    await expect(chat.locator("#heading")).to_have_text("Ask the calculator")
    await expect(chat.locator("#initial-message")).to_contain_text("Ask a sum")
    await expect(chat.locator("#message-input")).to_have_attribute("placeholder", "Your question…")
    send = chat.locator("#send")
    await expect(send).to_have_text("Ask")
    await expect(watch.locator("#composer")).to_be_hidden()  # hide-input
    await ui.screenshot("component-start")

    await chat.locator("#message-input").fill("what is 2 + 2")
    await send.click()
    await expect(chat.locator("li.msg-answer", has_text="2 + 2 = 4").first).to_be_visible()
    await expect(send).to_have_text("Send")
    await expect(chat.locator("#initial-message")).to_be_hidden()
    workflow_id = await chat.get_attribute("workflow-id")
    run_id = await chat.get_attribute("run-id")
    assert workflow_id and run_id

    # The read-only element follows the same run (its workflow-id set by the page).
    await expect(watch.locator("li.msg-answer", has_text="2 + 2 = 4").first).to_be_visible()
    await expect(watch.locator("#composer")).to_be_hidden()
    await expect(watch.locator("#heading")).to_have_text("Watching")

    await chat.locator("#message-input").fill("what is 2 + 5")
    await send.click()
    await expect(chat.locator("li.msg-question").last).to_contain_text("what is 2 + 5")
    await expect(chat.locator("li.msg-answer", has_text="2 + 5 = 7").first).to_be_visible()
    await expect(watch.locator("li.msg-question")).to_have_count(1)
    await ui.screenshot("component-conversation")

    updates = (await api.get(f"/runs/{workflow_id}/{run_id}/updates")).json()["messages"]
    questions = [m for m in updates if m["t"] == 8]
    assert [q["m"] for q in questions] == ["what is 2 + 5"], questions
    assert questions[0]["d"]["metadata"] == {
        "page": "embed-example",
        "customer": "c-42",
        "sent_from": "/ui/embed-example.html",
    }

    await chat.get_by_role("button", name="Close").click()
    await expect(chat).to_be_hidden()
    await expect(page.locator("#close-note")).to_have_text(
        "The conversation was closed (spindle-close)."
    )
    assert await page.evaluate("window.__closed") == 1

    # full-width: the read-only box is wider than the centred one was.
    watch_box = await watch.locator("section.embed").bounding_box()
    assert watch_box is not None and watch_box["width"] > 800, watch_box

    # api-base and api-key: an element made by script, with the tab's key forgotten.
    await page.evaluate(
        """([base, key, workflowId, runId]) => {
             sessionStorage.clear();
             const el = document.createElement('spindle-conversation');
             el.id = 'keyed-box';
             Object.assign(el, {apiBase: base, apiKey: key, workflowId, runId});
             el.hideInput = true;
             document.querySelector('main').append(el);
           }""",
        [browser_stack.base_url, browser_user.key, workflow_id, run_id],
    )
    keyed = page.locator("#keyed-box")
    await expect(keyed.locator("li.msg-answer", has_text="2 + 5 = 7").first).to_be_visible()
    await expect(keyed.locator("#heading")).to_have_text(workflow_id)
    await expect(keyed.locator("#composer")).to_be_hidden()
    await api.post(f"/runs/{workflow_id}/complete")
