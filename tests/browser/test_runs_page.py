"""The runs page (``/ui/runs``): the run list with its filters, the run graph with
live node status, durations and map counts, and the node inspector with the
envelopes before and after a node and "fork from here", in headless Chromium
against the browser stack (see ``conftest``)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.async_api import expect

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType, create_compact_message
from tests.browser.conftest import OpenPage
from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import start, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_runs_list_graph_view_and_node_inspector(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack, bus: MessageBus
) -> None:
    page = ui.page
    waiting = await start(api, graph="ui-chat", input={"question": "Where is the waiting run?"})
    done = await start(api, graph="ui-chat", input={"question": "Which run finished?"})
    for run in (waiting, done):
        await wait_for_status(api, run["workflow_id"], {"paused"})
    answer = await api.post(
        f"/runs/{done['workflow_id']}/{done['run_id']}/signal/UserInput",
        json={"data": {"verdict": "useful", "score": 4}},
    )
    assert answer.status_code == 200, answer.text
    await wait_for_status(api, done["workflow_id"], {"completed"})
    # What a map node reports while it works (only the counts are shown).
    progress: dict[str, Any] = {"node_id": "assistant", "done": 3, "failed": 1, "total": 4}
    await bus.post(
        waiting["workflow_id"],
        create_compact_message(AgentMessageType.BATCH_PROGRESS, "3/4 items", details=progress),
    )

    await page.goto(f"{browser_stack.base_url}/ui/runs")
    rows = page.locator("#run-table tbody tr")
    waiting_row = rows.filter(has_text=waiting["workflow_id"])
    done_row = rows.filter(has_text=done["workflow_id"])
    await expect(waiting_row).to_contain_text("paused")
    await expect(done_row).to_contain_text("completed")

    await page.select_option("#filter-graph", "ui-chat")
    await page.select_option("#filter-status", "completed")
    await expect(done_row).to_be_visible()
    await expect(waiting_row).to_have_count(0)
    await expect(rows.locator(".status-badge").filter(has_text="paused")).to_have_count(0)
    await ui.screenshot("runs-list-completed")

    await page.select_option("#filter-status", "paused")
    await expect(waiting_row).to_be_visible()
    await waiting_row.click()
    graph = page.locator("#run-graph")
    assistant = graph.locator("g.node[data-node-id='assistant']")
    rate = graph.locator("g.node[data-node-id='rate']")
    result = graph.locator("g.node[data-node-id='result']")
    await expect(assistant).to_have_attribute("data-status", "SUCCESS")
    await expect(rate).to_have_attribute("data-status", "waiting")
    await expect(result).to_have_attribute("data-status", "pending")
    await expect(assistant.locator(".node-items")).to_have_text("items 3/4 · 1 failed")
    await expect(assistant.locator(".node-status")).to_contain_text(" s")
    edge = graph.locator(".edge-group[data-from='assistant'][data-to='rate']")
    await expect(edge).to_have_count(1)
    await expect(page.locator("#run-status")).to_have_text("paused")
    await expect(page.locator("#run-facts [data-fact='history']")).to_contain_text("events")
    await ui.screenshot("run-graph-paused")

    await assistant.click()
    inspector = page.locator("#inspector")
    await expect(inspector.locator("#inspector-title")).to_have_text("Node assistant")
    execution = inspector.locator(".execution").first
    await expect(execution.locator("h3")).to_contain_text("SUCCESS")
    await expect(execution.locator(".envelope-before")).to_contain_text("Where is the waiting run?")
    await expect(execution.locator(".envelope-after")).to_contain_text('"payload"')
    await ui.screenshot("node-inspector")

    # Live: answering the prompt turns the graph green without a reload.
    answer = await api.post(
        f"/runs/{waiting['workflow_id']}/{waiting['run_id']}/signal/UserInput",
        json={"data": {"verdict": "not useful", "score": 2}},
    )
    assert answer.status_code == 200, answer.text
    await expect(rate).to_have_attribute("data-status", "SUCCESS")
    await expect(result).to_have_attribute("data-status", "SUCCESS")
    await expect(page.locator("#run-status")).to_have_text("completed")

    await rate.click()
    await expect(inspector.locator("#inspector-title")).to_have_text("Node rate")
    await expect(inspector.locator(".envelope-after").first).to_contain_text("not useful")
    await inspector.locator("summary", has_text="Fork from here").click()
    await inspector.get_by_role("button", name="Start the fork").click()
    notice = page.locator("#run-notice")
    await expect(notice).to_contain_text(f"Forked from {waiting['workflow_id']} at node rate")
    forked = (await page.locator("#run-title").text_content() or "").strip()
    assert forked.startswith("run-") and forked != waiting["workflow_id"]
    # The fork reused the assistant's answer and waits at the prompt again.
    await expect(graph.locator("g.node[data-node-id='rate']")).to_have_attribute(
        "data-status", "waiting"
    )
    await ui.screenshot("forked-run")
    reply = await api.get(f"/runs/{forked}")
    assert reply.json()["status"] == "paused"


async def test_the_node_routes_answer_problems_for_unknown_runs(
    api: httpx.AsyncClient,
) -> None:
    for path in ("/runs/run-nope/graph", "/runs/run-nope/nodes/assistant"):
        reply = await api.get(path)
        assert reply.status_code == 404, path
        assert reply.headers["content-type"].startswith("application/problem+json")
