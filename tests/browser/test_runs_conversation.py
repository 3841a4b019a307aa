"""The runs page's node inspector shows what an agent's model is given (issue 27,
item 5): the ``research-agent`` example runs with the offline model (a tool turn,
then an answer), and its agent node's Conversation section lists the same
messages, in the same order, as ``GET /runs/{workflow_id}/conversation``, paged
with "Load more", tool calls and results folded, user text shown as text. In
headless Chromium against the browser stack (see ``conftest``); screenshots in
test-artifacts/browser.
"""

from __future__ import annotations

import httpx
import pytest
from playwright.async_api import expect

from tests.browser.conftest import OpenPage
from tests.e2e.conftest import SpindleStack, example_graph
from tests.e2e.run_driver import start, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

QUESTION = "what is 2 + 3 <b>in bold</b>"


@pytest.fixture
async def research_agent(api: httpx.AsyncClient) -> str:
    reply = await api.put("/graphs/research-agent", json=example_graph("research-agent"))
    assert reply.status_code in (200, 201), reply.text
    return "research-agent"


async def test_the_agent_node_inspector_shows_the_conversation_the_model_is_given(
    research_agent: str, ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    run = await start(api, graph=research_agent, input={"question": QUESTION})
    workflow_id = run["workflow_id"]
    await wait_for_status(api, workflow_id, {"completed"})
    reply = await api.get(
        f"/runs/{workflow_id}/conversation", params={"node": "researcher", "limit": 500}
    )
    assert reply.status_code == 200, reply.text
    given = reply.json()
    roles = [m["role"] for m in given["messages"]]
    assert given["total"] == len(roles) and given["next_cursor"] is None
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant", roles
    assert "tool" in roles, roles  # the calculator's turn
    calls = [c for m in given["messages"] for c in m["tool_calls"]]
    assert any(c["name"] == "calculator" for c in calls), calls

    page = ui.page
    await page.goto(f"{browser_stack.base_url}/ui/runs")
    section = page.locator("#conversation")
    # Two messages a page, so that the test pages through "Load more".
    await section.evaluate("node => { node.dataset.pageSize = '2'; }")
    await page.locator("#run-table tbody tr").filter(has_text=workflow_id).click()
    agent = page.locator("#run-graph g.node[data-node-id='researcher']")
    await expect(agent).to_have_attribute("data-status", "SUCCESS")
    await agent.focus()
    await page.keyboard.press("Enter")  # the graph's nodes are keyboard buttons

    await expect(page.get_by_role("heading", name="Conversation")).to_be_visible()
    messages = section.locator("li.conv-msg")
    await expect(messages).to_have_count(2)
    more = section.get_by_role("button", name="Load more")
    pages = 1
    while pages * 2 < given["total"]:
        await more.click()
        pages += 1
        await expect(messages).to_have_count(min(pages * 2, given["total"]))
    await expect(more).to_be_hidden()
    await expect(messages).to_have_count(given["total"])
    shown_roles = [await m.get_attribute("data-role") for m in await messages.all()]
    assert shown_roles == roles
    meta = section.locator(".conversation-meta")
    await expect(meta).to_contain_text(f"{given['total']} messages given to the model")
    await expect(meta).to_contain_text(f"{given['dropped']} dropped")
    await expect(meta).to_contain_text(f"about {given['tokens']:,} tokens")

    # The user's markup is text, not HTML.
    user = messages.nth(1)
    await expect(user.locator(".conv-content")).to_have_text(QUESTION)
    await expect(section.locator("b")).to_have_count(0)
    # Tool calls and results are folded; a keyboard opens them.
    call = section.locator("details.conv-tool-call").filter(has_text="calculator").first
    result = section.locator("details.conv-tool-result").first
    for fold in (call, result):
        await expect(fold).not_to_have_attribute("open", "")
    await call.locator("summary").focus()
    await page.keyboard.press("Enter")
    await expect(call).to_have_attribute("open", "")
    await expect(call.locator(".conv-content")).to_contain_text("2 + 3")
    await result.locator("summary").click()
    await expect(result.locator(".conv-content")).to_be_visible()
    answer = given["messages"][-1]["content"]
    await expect(messages.last.locator(".conv-content")).to_have_text(answer)
    await ui.screenshot("runs-node-conversation")

    # Another node (the output) has no conversation: the section goes away.
    await page.locator("#run-graph g.node[data-node-id='answer']").click()
    await expect(page.locator("#inspector-title")).to_have_text("Node answer")
    await expect(section).to_be_hidden()


async def test_a_live_agents_conversation_grows_in_the_inspector_without_a_reload(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    reply = await api.put("/graphs/chat", json=example_graph("chat"))
    assert reply.status_code in (200, 201), reply.text
    run = await start(api, graph="chat", input={"message": "what is 2 + 2"})
    workflow_id = run["workflow_id"]
    page = ui.page
    # The run and node in the URL open the inspector directly.
    await page.goto(f"{browser_stack.base_url}/ui/runs#run={workflow_id}&node=assistant")
    section = page.locator("#conversation")
    messages = section.locator("li.conv-msg")
    await expect(messages.last).to_contain_text("2 + 2 = 4")
    await expect(messages.last).to_have_attribute("data-role", "assistant")

    # The interactive agent waits; a message from the API reaches it, and the
    # inspector (polling the running run) shows the longer conversation.
    sent = await api.post(
        f"/runs/{workflow_id}/{run['run_id']}/signal/UserInput", json={"message": "and 3 + 4"}
    )
    assert sent.status_code == 200, sent.text
    await expect(messages.last).to_contain_text("3 + 4 = 7")
    given = (
        await api.get(f"/runs/{workflow_id}/conversation", params={"node": "assistant"})
    ).json()
    await expect(messages).to_have_count(given["total"])
    await expect(section.locator(".conv-msg[data-role='user']")).to_have_count(2)
    await ui.screenshot("runs-node-conversation-live")
    done = await api.post(f"/runs/{workflow_id}/complete")
    assert done.status_code in (200, 202), done.text
    await wait_for_status(api, workflow_id, {"completed"})
