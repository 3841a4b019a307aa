"""The runs page as a studio (issue 29): a full-width run list that pages, searches
and stays live; a completed run's graph laid out by dagre with every node's state
(a skipped node, a workstream node), edge labels that never overlap, node texts
inside their boxes, tokens and cost; fork from a node with edited state; and the
page at a phone's width without horizontal scrolling. In headless Chromium against
the browser stack (see ``conftest``); screenshots in test-artifacts/browser."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from playwright.async_api import Page, expect

from tests.browser.conftest import OpenPage
from tests.e2e.conftest import SpindleStack
from tests.e2e.run_driver import start, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

LONG_LABEL = "Count the words of the approved draft before it is published"


def studio_graph(name: str) -> dict[str, Any]:
    """A tool, a workstream (waited for), a router with two ``when`` edges (one not
    taken: its target is skipped), an agent and the output."""
    return {
        "name": name,
        "entry": "draft",
        "input_schema": {
            "type": "object",
            "properties": {"topic": {"type": "string"}},
            "required": ["topic"],
        },
        "nodes": [
            {
                "id": "draft",
                "type": "tool",
                "params": {"tool": "draft_document", "args": {"topic": "{{ input.topic }}"}},
            },
            {
                "id": "helper",
                "type": "workstream",
                "params": {"task": "summarise {{ input.topic }}", "wait": True},
            },
            {
                "id": "route",
                "type": "router",
                "params": {
                    "routes": [{"when": "input.topic == 'ships'", "port": "ships"}],
                    "default": "other",
                },
            },
            {
                "id": "publish_the_approved_draft",
                "type": "tool",
                "label": LONG_LABEL,
                "params": {"tool": "word_count", "args": {"text": "{{ input.topic }}"}},
            },
            {
                "id": "revise",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "revise"}},
            },
            {"id": "assistant", "type": "agent", "params": {"prompt": "{{ input.topic }}"}},
            {"id": "result", "type": "output", "params": {"select": "publish_the_approved_draft"}},
        ],
        "edges": [
            {"from": "draft", "to": "helper"},
            {"from": "helper", "to": "route"},
            {"from": "route", "to": "publish_the_approved_draft", "when": "input.topic == 'ships'"},
            {"from": "route", "to": "revise", "when": "input.topic != 'ships'"},
            {"from": "publish_the_approved_draft", "to": "assistant"},
            {"from": "revise", "to": "assistant"},
            {"from": "assistant", "to": "result"},
        ],
    }


def quick_graph(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "count",
        "nodes": [
            {
                "id": "count",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a"}},
            },
            {"id": "done", "type": "output"},
        ],
        "edges": [{"from": "count", "to": "done"}],
    }


async def open_runs(ui: OpenPage, stack: SpindleStack, hash_: str = "") -> Page:
    page = ui.page
    await page.goto(f"{stack.base_url}/ui/runs{hash_}")
    await expect(page.locator("body")).to_have_attribute("data-ready", "true")
    return page


async def no_horizontal_scroll(page: Page) -> None:
    widths = await page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"the page scrolls sideways: {widths}"


async def test_the_run_list_pages_searches_and_stays_live(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    name = f"quick-{uuid.uuid4().hex[:6]}"
    assert (await api.put(f"/graphs/{name}", json=quick_graph(name))).status_code in (200, 201)
    conversation = f"conv-{uuid.uuid4().hex[:8]}"
    runs = [await start(api, graph=name, input={}) for _ in range(11)]
    runs.append(await start(api, graph=name, input={}, conversation_id=conversation))
    for run in runs:
        await wait_for_status(api, run["workflow_id"], {"completed"})
    newest_first = [r["workflow_id"] for r in runs][::-1]

    page = await open_runs(ui, browser_stack)
    await page.select_option("#filter-graph", name)
    await page.select_option("#page-size", "10")
    rows = page.locator("#run-table tbody tr")
    await expect(page.locator("#run-count")).to_have_text("1\u201310 of 12 runs")
    await expect(rows).to_have_count(10)
    assert [await r.get_attribute("data-workflow-id") for r in await rows.all()] == newest_first[
        :10
    ]
    await expect(page.locator("#page-prev")).to_be_disabled()
    await page.get_by_role("button", name="Older →").click()
    await expect(page.locator("#run-count")).to_have_text("11\u201312 of 12 runs")
    await expect(rows).to_have_count(2)
    await expect(page.locator("#page-next")).to_be_disabled()
    await expect(page.locator("#page-number")).to_have_text("page 2 of 2")
    await page.get_by_role("button", name="← Newer").click()
    await expect(rows).to_have_count(10)

    # Ids stay on one line (cut with an ellipsis), the whole id in the tooltip.
    link = rows.first.locator("a.run-id")
    await expect(link).to_have_attribute("title", newest_first[0])
    box = await link.bounding_box()
    assert box is not None and box["height"] < 24, box
    await ui.screenshot("runs-list-1280")

    # A part of an id, typed in any case, finds that run.
    target = newest_first[3]
    await page.fill("#filter-id", target[-10:].upper())
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-workflow-id", target)
    await page.fill("#filter-id", "")
    await page.fill("#filter-conversation", conversation)
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_have_attribute("data-workflow-id", runs[-1]["workflow_id"])
    await expect(rows.first.locator(".col-conversation")).to_have_text(conversation)
    await page.get_by_role("button", name="Clear").click()
    await page.select_option("#filter-graph", name)
    await expect(page.locator("#run-count")).to_contain_text("of 12 runs")
    # A time range after the runs: none.
    await page.fill("#filter-after", "2999-01-01T00:00")
    await page.locator("#filter-after").dispatch_event("change")
    await expect(page.locator("#run-empty")).to_be_visible()
    await expect(rows).to_have_count(0)

    # Live: a paused run's row turns completed without a reload.
    waiting = await start(api, graph="ui-chat", input={"question": "Is the list live?"})
    await wait_for_status(api, waiting["workflow_id"], {"paused"})
    await page.get_by_role("button", name="Clear").click()
    await page.fill("#filter-id", waiting["workflow_id"])
    row = page.locator(f"#run-table tr[data-workflow-id='{waiting['workflow_id']}']")
    await expect(row.locator(".status-badge")).to_have_text("paused")
    answer = await api.post(
        f"/runs/{waiting['workflow_id']}/{waiting['run_id']}/signal/UserInput",
        json={"data": {"verdict": "useful", "score": 5}},
    )
    assert answer.status_code == 200, answer.text
    await expect(row.locator(".status-badge")).to_have_text("completed")
    # Keyboard: the id is a link that opens the run.
    await row.locator("a.run-id").focus()
    await page.keyboard.press("Enter")
    await expect(page.locator("#run-title")).to_have_text(waiting["workflow_id"])
    await expect(page.locator("#run-status")).to_have_text("completed")
    await page.get_by_role("button", name="← All runs").click()
    await expect(row.locator(".status-badge")).to_have_text("completed")


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


GEOMETRY_JS = """() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {x: r.x, y: r.y, width: r.width, height: r.height}; };
  const nodes = [...document.querySelectorAll('#run-graph g.node')].map((g) => ({
    id: g.dataset.nodeId, rect: box(g.querySelector('rect')),
    texts: [...g.querySelectorAll('text')].map((t) => ({text: t.textContent, box: box(t)})),
  }));
  const labels = [...document.querySelectorAll('#run-graph .edge-label')].map((l) => ({
    text: l.querySelector('text').textContent, box: box(l.querySelector('rect')),
    textBox: box(l.querySelector('text')) }));
  return {nodes, labels};
}"""


async def test_a_completed_runs_graph_shows_states_usage_and_readable_labels(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    name = f"studio-{uuid.uuid4().hex[:6]}"
    reply = await api.put(f"/graphs/{name}", json=studio_graph(name))
    assert reply.status_code in (200, 201), reply.text
    run = await start(api, graph=name, input={"topic": "ships"})
    workflow_id = run["workflow_id"]
    await wait_for_status(api, workflow_id, {"completed"})
    usage = (await api.get(f"/runs/{workflow_id}/usage")).json()
    assert usage["total"]["tokens"] > 0 and usage["nodes"]["assistant"]["llm_turns"] == 1
    assert usage["workstreams"]["ws-1"]["tokens"] > 0

    page = await open_runs(ui, browser_stack, f"#run={workflow_id}")
    graph = page.locator("#run-graph")
    node = lambda node_id: graph.locator(f"g.node[data-node-id='{node_id}']")  # noqa: E731
    await expect(page.locator("#run-status")).to_have_text("completed")
    await expect(node("revise")).to_have_attribute("data-status", "SKIPPED")
    await expect(node("helper")).to_have_attribute("data-status", "SUCCESS")
    await expect(node("helper").locator(".node-child")).to_have_text("child completed")
    for done in ("draft", "route", "publish_the_approved_draft", "assistant", "result"):
        await expect(node(done)).to_have_attribute("data-status", "SUCCESS")
    await expect(graph.locator("g.node[data-status='pending']")).to_have_count(0)
    # Tokens and cost: per node (the agent, the workstream's agent) and per run.
    tokens = usage["nodes"]["assistant"]["tokens"]
    await expect(node("assistant").locator(".node-usage")).to_contain_text(f"{tokens} tokens")
    ws_tokens = usage["workstreams"]["ws-1"]["tokens"]
    await expect(node("helper").locator(".node-usage")).to_contain_text(f"{ws_tokens} tokens")
    facts = page.locator("#run-facts")
    await expect(facts.locator("[data-fact='tokens']")).to_have_text(
        f"{usage['total']['tokens']:,}"
    )
    await expect(facts.locator("[data-fact='cost']")).to_have_text("$0.0000")
    await expect(facts.locator("[data-fact='duration']")).to_contain_text("s")

    # Two `when` labels from one router: readable, apart, and on no node; every
    # node's texts inside its box.
    geometry = await page.evaluate(GEOMETRY_JS)
    labels = geometry["labels"]
    assert sorted(label["text"] for label in labels) == [
        "input.topic != 'ships'",
        "input.topic == 'ships'",
    ]
    assert not overlaps(labels[0]["box"], labels[1]["box"]), labels
    for label in labels:
        assert inside(label["textBox"], label["box"]), label
        for drawn in geometry["nodes"]:
            assert not overlaps(label["box"], drawn["rect"]), (label, drawn["id"])
    for drawn in geometry["nodes"]:
        for text in drawn["texts"]:
            assert inside(text["box"], drawn["rect"]), (drawn["id"], text)
    for a in geometry["nodes"]:
        for b in geometry["nodes"]:
            assert a is b or not overlaps(a["rect"], b["rect"]), (a["id"], b["id"])
    long_node = node("publish_the_approved_draft")
    await expect(long_node.locator(".node-type")).to_have_text(f"tool · {LONG_LABEL}")
    await ui.screenshot("run-graph-completed")

    # The inspector: the hint goes while a node is open, and comes back after.
    hint = page.locator("#graph-hint")
    await expect(hint).to_be_visible()
    await node("assistant").focus()
    await page.keyboard.press("Enter")
    inspector = page.locator("#inspector")
    await expect(inspector.locator("#inspector-title")).to_have_text("Node assistant")
    await expect(hint).to_be_hidden()
    await expect(inspector.locator("#inspector-usage")).to_contain_text(f"{tokens} tokens")
    await expect(inspector.locator("#inspector-usage")).to_contain_text("1 LLM turn")
    await expect(inspector.get_by_role("heading", name="Conversation")).to_be_visible()
    await ui.screenshot("run-inspector-agent")
    # The workstream node: its child's conversation.
    await node("helper").click()
    await expect(inspector.locator("#inspector-title")).to_have_text("Node helper")
    await expect(inspector.locator(".execution-summary")).to_have_text("ws-1 completed")
    await expect(inspector.locator(".conversation-meta")).to_contain_text("workstream ws-1")
    await node("revise").click()
    await expect(inspector.locator(".execution h3")).to_contain_text("SKIPPED")
    await page.keyboard.press("Escape")
    await expect(inspector).to_be_hidden()
    await expect(hint).to_be_visible()


async def test_fork_from_a_node_with_edited_state(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    run = await start(api, graph="ui-chat", input={"question": "Fork me?"})
    await wait_for_status(api, run["workflow_id"], {"paused"})
    answer = await api.post(
        f"/runs/{run['workflow_id']}/{run['run_id']}/signal/UserInput",
        json={"data": {"verdict": "not useful", "score": 1}},
    )
    assert answer.status_code == 200, answer.text
    await wait_for_status(api, run["workflow_id"], {"completed"})

    page = await open_runs(ui, browser_stack, f"#run={run['workflow_id']}&node=result")
    inspector = page.locator("#inspector")
    await expect(inspector.locator("#inspector-title")).to_have_text("Node result")
    await inspector.locator("summary", has_text="Fork from here").click()
    editor = inspector.get_by_label("State edits")
    # Filled with what the node was given: the prompt's recorded answer.
    await expect(editor).to_have_value(
        '{\n  "rate": {\n    "verdict": "not useful",\n    "score": 1\n  }\n}'
    )
    await editor.fill('{"rate": {"verdict": "useful",')
    await expect(inspector.locator("#fork-error")).to_contain_text("not valid JSON")
    await expect(editor).to_have_attribute("aria-invalid", "true")
    await expect(inspector.get_by_role("button", name="Start the fork")).to_be_disabled()
    await editor.fill("[1, 2]")
    await expect(inspector.locator("#fork-error")).to_contain_text("must be a JSON object")
    await editor.fill('{"rate": {"verdict": "useful", "score": 5}}')
    await expect(inspector.locator("#fork-error")).to_be_hidden()
    await ui.screenshot("run-fork-editor")
    await inspector.get_by_role("button", name="Start the fork").click()
    notice = page.locator("#run-notice")
    await expect(notice).to_contain_text(f"Forked from {run['workflow_id']} at node result")
    forked = (await page.locator("#run-title").text_content() or "").strip()
    assert forked.startswith("run-") and forked != run["workflow_id"]
    await expect(page.locator("#run-status")).to_have_text("completed")
    done = (await api.get(f"/runs/{forked}")).json()
    assert done["output"]["verdict"] == "useful" and done["output"]["score"] == 5


async def test_the_page_fits_a_phone(
    ui: OpenPage, api: httpx.AsyncClient, browser_stack: SpindleStack
) -> None:
    name = f"studio-{uuid.uuid4().hex[:6]}"
    assert (await api.put(f"/graphs/{name}", json=studio_graph(name))).status_code in (200, 201)
    run = await start(api, graph=name, input={"topic": "boats"})
    await wait_for_status(api, run["workflow_id"], {"completed"})
    page = ui.page
    await page.set_viewport_size({"width": 390, "height": 844})
    await open_runs(ui, browser_stack)
    await expect(page.locator("#run-table tbody tr").first).to_be_visible()
    await no_horizontal_scroll(page)
    await ui.screenshot("runs-list-phone")
    await page.locator(f"#run-table a.run-id[title='{run['workflow_id']}']").click()
    graph = page.locator("#run-graph")
    # The other branch this time: publish is skipped, revise ran.
    await expect(
        graph.locator("g.node[data-node-id='publish_the_approved_draft']")
    ).to_have_attribute("data-status", "SKIPPED")
    await no_horizontal_scroll(page)
    await graph.locator("g.node[data-node-id='revise']").click()
    await expect(page.locator("#inspector-title")).to_have_text("Node revise")
    await no_horizontal_scroll(page)
    await ui.screenshot("run-view-phone")


async def test_the_layout_library_is_served_with_its_version_and_licence(
    browser_stack: SpindleStack,
) -> None:
    async with httpx.AsyncClient(base_url=browser_stack.base_url) as client:
        for name in ("dagre.esm.js", "dagre.VERSION", "dagre.LICENSE"):
            reply = await client.get(f"/ui/assets/vendor/{name}")
            assert reply.status_code == 200, name
        script = await client.get("/ui/assets/vendor/dagre.esm.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert "3.1.3" in (await client.get("/ui/assets/vendor/dagre.VERSION")).text
        assert "MIT" in script.text[-200:]
        for bad in ("/ui/assets/vendor/.hidden", "/ui/assets/vendor/%2E%2E%2Fruns.js"):
            assert (await client.get(bad)).status_code == 404, bad
