"""A conversation with the ``chat`` example's interactive agent on the web page, in
headless Chromium: three messages typed into the input box, each answered, then
Done ends the agent (docs/conversations.md). Screenshots in test-artifacts/browser.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.conftest import OpenPage
from tests.e2e.conftest import example_graph

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


@pytest.fixture
async def chat_example(api: httpx.AsyncClient) -> str:
    """The chat example, registered before the page loads its graph list."""
    reply = await api.put("/graphs/chat", json=example_graph("chat"))
    assert reply.status_code in (200, 201), reply.text
    return "chat"


async def test_three_messages_to_the_chat_agent_are_each_answered(
    chat_example: str, ui: OpenPage, api: httpx.AsyncClient
) -> None:
    page = ui.page
    done = page.locator("#complete-agent")
    await page.select_option("#graph-select", chat_example)
    await page.fill("#message-input", "what is 2 + 2")
    await page.click("#send")
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "live")
    workflow_id = (await page.evaluate("location.hash")).removeprefix("#run=").split("/", 1)[0]
    await expect(page.locator("li.msg-answer", has_text="2 + 2 = 4").first).to_be_visible()
    await expect(done).to_be_visible()  # the agent waits for the next message

    exchanges = [
        ("what is 2 + 5", "2 + 5 = 7"),
        ("and 10 - 4", "10 - 4 = 6"),
        ("7 + 1?", "7 + 1 = 8"),
    ]
    for n, (question, answer) in enumerate(exchanges, 1):
        await page.fill("#message-input", question)
        await page.click("#send")
        await expect(page.locator("li.msg-question")).to_have_count(n)
        await expect(page.locator("li.msg-question").last).to_contain_text(question)
        await expect(page.locator("li.msg-answer", has_text=answer).first).to_be_visible()
        await expect(done).to_be_visible()
        await expect(page.locator("#message-input")).to_have_value("")
        await ui.screenshot(f"chat-message-{n}")

    answers = await page.locator("li.msg-answer").all_inner_texts()
    for question, answer in exchanges:
        assert any(answer in text and question in text for text in answers), (question, answers)
    await done.click()
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "ended")
    await expect(done).to_be_hidden()
    await ui.screenshot("chat-completed")
    described = (await api.get(f"/runs/{workflow_id}")).json()
    assert described["status"] == "completed", described
