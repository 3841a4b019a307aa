"""The conversation web page (``GET /ui/``) in headless Chromium, as a person uses it.

Each test drives the real page against the real gateway, worker, Temporal,
Redis and MongoDB of the browser stack; messages that only a model could write
(hostile markup, a retried stream) are posted through the real message bus.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.async_api import Route, expect

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import (
    AgentMessageType,
    PlanDetails,
    PlanTask,
    create_compact_message,
)
from spindle.worker.tools.plans import plan_text
from tests.browser.conftest import OpenPage, start_run
from tests.e2e.conftest import SpindleStack

pytestmark = [pytest.mark.e2e, pytest.mark.browser]

# Records, per activity id, the text of its streaming item each time the page
# changed it, and when the final message with that id replaced it.
RECORD_STREAMING = """
() => {
  window.__chunks = {};
  window.__finals = {};
  const seen = (li) => {
    const text = li.querySelector('.streaming-text')?.textContent ?? '';
    (window.__chunks[li.dataset.i] ??= []).push({text, at: performance.now()});
  };
  new MutationObserver((records) => {
    const touched = new Set();
    for (const r of records) {
      if (r.type === 'characterData') {
        const li = r.target.parentElement?.closest('li.msg-chunk');
        if (li && li.isConnected) touched.add(li);
      }
      for (const node of r.addedNodes) {
        if (node.nodeType !== 1) continue;
        if (node.matches('li.msg-chunk')) touched.add(node);
        else if (node.matches('li.msg') && node.dataset.i && !(node.dataset.i in window.__finals)) {
          window.__finals[node.dataset.i] = performance.now();
        }
      }
    }
    touched.forEach(seen);
  }).observe(document.getElementById('messages'),
             {childList: true, subtree: true, characterData: true});
}
"""


LONG_QUESTION = (
    "How do the tides work, why are there two high tides a day in most places, "
    "what part do the Moon and the Sun each play, why are spring tides higher than "
    "neap tides, and why do some bays see a range of many metres while others barely "
    "change at all?"
)


def words(text: str) -> str:
    return " ".join(text.split())


async def test_tokens_stream_then_the_form_takes_an_answer(
    ui: OpenPage, api: httpx.AsyncClient
) -> None:
    page = ui.page
    await page.evaluate(RECORD_STREAMING)
    # A long question: the offline model restates it, 20 ms a word, so its answer
    # streams for about a second, well after the page has attached to the stream.
    workflow_id, _ = await start_run(page, LONG_QUESTION)

    form = page.locator("li.msg-request-input form")
    await form.wait_for()
    answer = page.locator("li.msg-answer[data-i]").first
    await answer.wait_for()
    activity = await answer.get_attribute("data-i")
    assert activity is not None
    chunks: dict[str, list[dict[str, Any]]] = await page.evaluate("window.__chunks")
    finals: dict[str, float] = await page.evaluate("window.__finals")
    seen = chunks.get(activity, [])
    # The answer was seen growing, token batch by token batch, before the final
    # ANSWER replaced it; what had streamed is what the final message says.
    assert len({len(s["text"]) for s in seen}) >= 2, seen
    assert seen[0]["at"] < finals[activity]
    final_text = await answer.locator(".body").inner_text()
    assert words(seen[-1]["text"]) == words(final_text)
    assert await page.locator("li.msg-chunk").count() == 0
    await ui.screenshot("conversation-prompt")

    # A refused answer: the run's 422 shows inline, next to the field, and the
    # run keeps waiting.
    await form.get_by_label("Verdict").select_option("useful")
    await form.get_by_label("Score").fill("9")
    await form.get_by_role("button", name="Send answer").click()
    score_error = form.locator(".field[data-field='score'] .field-error")
    await expect(score_error).to_be_visible()
    await expect(score_error).to_contain_text("9")
    await expect(form.locator(".form-error")).to_contain_text("score")
    await ui.screenshot("conversation-refused-answer")
    described = (await api.get(f"/runs/{workflow_id}")).json()
    assert described["status"] == "paused", described

    await form.get_by_label("Score").fill("4")
    await form.get_by_label("Follow up").check()
    await form.get_by_label("Comment").fill("clear enough")
    await form.get_by_role("button", name="Send answer").click()
    await expect(form.locator(".answered-note")).to_be_visible()
    # The YOU echo shows the answer's fields, not the raw JSON the run received.
    question = page.locator("li.msg-question")
    await expect(question.locator("dl.answer-fields dt")).to_have_text(
        ["verdict", "score", "follow_up", "comment"]
    )
    await expect(question.locator("dl.answer-fields dd")).to_have_text(
        ["useful", "4", "true", "clear enough"]
    )
    assert "{" not in await question.inner_text()
    # COMPLETE shows the run's structured output as pretty JSON, in a <details>.
    complete = page.locator("li.msg-complete")
    await expect(complete.locator("details.json-view pre")).to_contain_text('"verdict": "useful"')
    await expect(complete.locator("details.json-view summary")).to_contain_text("Output (JSON")
    assert "\\n" not in await complete.inner_text()
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "ended")
    await expect(page.locator("li.msg-answer").last).to_contain_text("Rated useful")
    await ui.screenshot("conversation-complete")
    result = (await api.get(f"/runs/{workflow_id}")).json()
    assert result["status"] == "completed", result


async def test_model_markup_renders_as_text_and_runs_nothing(
    ui: OpenPage, api: httpx.AsyncClient, bus: MessageBus
) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Say something")
    await page.locator("li.msg-request-input form").wait_for()
    hostile = (
        '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script> '
        "**bold** [bad](javascript:window.__xss=3) [good](https://example.com/a)"
    )
    await bus.post(
        workflow_id,
        create_compact_message(AgentMessageType.STREAMING_CHUNK, hostile, activity_id="xss.c"),
    )
    await bus.post(workflow_id, create_compact_message(AgentMessageType.ANSWER, hostile))
    await bus.post(
        workflow_id,
        create_compact_message(
            AgentMessageType.WARNING, "<iframe src=javascript:window.__xss=5></iframe>"
        ),
    )
    warning = page.locator("li.msg-warning").last
    await expect(warning).to_contain_text("<iframe src=javascript:window.__xss=5></iframe>")
    chunk = page.locator("li.msg-chunk[data-i='xss.c']")
    await expect(chunk).to_contain_text('<img src=x onerror="window.__xss=1">')
    answer = page.locator("li.msg-answer").last
    await expect(answer).to_contain_text('<img src=x onerror="window.__xss=1">')
    await expect(answer).to_contain_text("<script>window.__xss=2</script>")
    await expect(answer.locator("strong")).to_have_text("bold")
    await expect(answer.get_by_role("link", name="good")).to_have_attribute(
        "href", "https://example.com/a"
    )
    await expect(answer).to_contain_text("[bad](javascript:window.__xss=3)")
    messages = page.locator("#messages")
    for tag in ("img", "script", "iframe", "a[href^='javascript']"):
        assert await messages.locator(tag).count() == 0, tag
    assert await page.evaluate("window.__xss") is None
    await ui.screenshot("conversation-hostile-markup")
    await api.post(f"/runs/{workflow_id}/cancel")
    await expect(page.locator("li.msg-terminated")).to_be_visible()


async def test_a_restarted_stream_drops_its_earlier_chunks(ui: OpenPage, bus: MessageBus) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Retry me")
    await page.locator("li.msg-request-input form").wait_for()

    def chunk(text: str) -> Any:
        return create_compact_message(
            AgentMessageType.STREAMING_CHUNK, text, activity_id="retried.1"
        )

    await bus.post(workflow_id, chunk("garbled half"))
    streaming = page.locator("li.msg-chunk[data-i='retried.1']")
    await expect(streaming).to_contain_text("garbled half")
    await bus.post(
        workflow_id,
        create_compact_message(
            AgentMessageType.RESTARTING, "retrying (attempt 2)", activity_id="retried.1"
        ),
    )
    await expect(page.locator("li.msg-restarting")).to_be_visible()
    await expect(streaming).to_have_count(0)
    await bus.post(workflow_id, chunk("clean "))
    await bus.post(workflow_id, chunk("answer"))
    await expect(streaming.locator(".streaming-text")).to_have_text("clean answer")
    await bus.post(
        workflow_id,
        create_compact_message(AgentMessageType.ANSWER, "clean answer", activity_id="retried.1"),
    )
    final = page.locator("li.msg-answer[data-i='retried.1']")
    await expect(final).to_contain_text("clean answer")
    await expect(streaming).to_have_count(0)
    assert "garbled" not in await page.locator("#messages").inner_text()


async def test_the_stream_survives_a_gateway_restart_and_an_expired_token(
    ui: OpenPage, api: httpx.AsyncClient, bus: MessageBus, browser_stack: SpindleStack
) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Keep listening")
    await page.locator("li.msg-request-input form").wait_for()
    first_url = await page.evaluate("window.spindleStream.source.url")
    expired = parse_qs(urlsplit(first_url).query)["access_token"][0]

    # From now on the gateway refuses the first token, as it does once a token
    # has expired: the browser's own reconnects get 401 and the page must mint
    # a new token and resume where it was.
    refused: list[str] = []

    async def refuse_expired(route: Route) -> None:
        url = route.request.url
        if parse_qs(urlsplit(url).query).get("access_token") == [expired]:
            refused.append(url)
            await route.continue_(url=url.replace(expired, expired + "x"))
        else:
            await route.continue_()

    await page.route("**/stream?*", refuse_expired)
    browser_stack.kill_gateway()
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "reconnecting")
    await bus.post(
        workflow_id, create_compact_message(AgentMessageType.SYSTEM, "posted while down")
    )
    await browser_stack.restart_gateway()
    posted_while_down = page.locator("li.msg-system", has_text="posted while down")
    # The page may be between backoff attempts (1 s, 2 s, 4 s …) when the gateway returns.
    await expect(posted_while_down).to_have_count(1, timeout=40_000)
    await expect(page.locator("#run-state")).to_have_attribute("data-state", "live")
    assert await page.evaluate("window.spindleStream.tokens") >= 2
    assert refused, "the browser never retried with its first token"
    resumed_url = await page.evaluate("window.spindleStream.source.url")
    assert expired not in resumed_url
    assert "lastEventId=" in resumed_url

    await bus.post(workflow_id, create_compact_message(AgentMessageType.SYSTEM, "after restart"))
    await expect(page.locator("li.msg-system", has_text="after restart")).to_have_count(1)
    await expect(page.locator("li.msg-answer")).to_have_count(1)  # nothing replayed twice
    await api.post(f"/runs/{workflow_id}/cancel")


async def test_each_kind_of_message_has_its_own_look(ui: OpenPage, bus: MessageBus) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Show me everything")
    await page.locator("li.msg-request-input form").wait_for()
    T = AgentMessageType
    batch = {"node_id": "lead", "turn": 2, "batch_size": 3}
    await bus.post_many(
        workflow_id,
        [
            (create_compact_message(m_type, text, details=details), None)
            for m_type, text, details in [
                (T.PLAN, "The plan", {"tasks": ["search", {"title": "summarise"}]}),
                (T.THOUGHT, "I should *search* first", None),
                (T.UPDATE, "looked up 3 notes", {"tool": "search_notes"}),
                (T.BATCH_PROGRESS, "tool 2 of 3 done", {**batch, "batch_index": 2}),
                (T.BATCH_PROGRESS, "tool 1 of 3 done", {**batch, "batch_index": 1}),
                (T.WARNING, "loop bound reached", None),
                (T.ERROR, "tool failed", None),
                (T.SYSTEM, "file processed", None),
            ]
        ],
    )
    await expect(page.locator("li.msg-system", has_text="file processed")).to_be_visible()
    expected_badges = {
        "plan": "Plan",
        "thought": "Thought",
        "update": "Update",
        "batch": "Progress",
        "warning": "Warning",
        "error": "Error",
        "system": "System",
        "answer": "Answer",
        "request-input": "Input needed",
    }
    for kind, badge in expected_badges.items():
        await expect(page.locator(f"li.msg-{kind} .badge").first).to_have_text(badge)
    await expect(page.locator("li.msg-plan ol.plan-tasks li")).to_have_text(["search", "summarise"])
    await expect(page.locator("li.msg-thought em")).to_have_text("search")
    await expect(page.locator("li.msg-update .tool-name")).to_have_text("search_notes")
    # Both calls of one turn share one progress bar.
    progress = page.locator("li.msg-batch")
    await expect(progress).to_have_count(1)
    await expect(progress).to_contain_text("2 of 3")
    assert await progress.locator("progress").evaluate("bar => bar.value") == 2
    colours = await page.evaluate(
        """(kinds) => kinds.map((kind) => getComputedStyle(
             document.querySelector(`li.msg-${kind}`)).borderLeftColor)""",
        list(expected_badges),
    )
    assert len(set(colours)) >= 6, colours  # told apart at a glance, not only by label
    await ui.screenshot("conversation-message-types")


async def test_update_plan_shows_as_a_checklist_that_updates_in_place(
    ui: OpenPage, bus: MessageBus
) -> None:
    page = ui.page
    workflow_id, _ = await start_run(page, "Plan it")
    await page.locator("li.msg-request-input form").wait_for()

    def plan(tasks: list[tuple[str, str]], explanation: str | None = None) -> Any:
        # What update_plan posts (shared.contracts.messages.PlanDetails).
        details = PlanDetails(
            node_id="assistant",
            tasks=[PlanTask(title=title, status=status) for title, status in tasks],  # type: ignore[arg-type]
            explanation=explanation,
        )
        text = plan_text(details.tasks, explanation)
        return create_compact_message(
            AgentMessageType.PLAN, text, details=details.model_dump(exclude_none=True)
        )

    await bus.post(workflow_id, plan([("Read the notes", "in_progress"), ("Draft", "pending")]))
    plans = page.locator("li.msg-plan")
    await expect(plans.locator("ol.checklist li")).to_have_text(["Read the notes", "Draft"])
    await bus.post(
        workflow_id,
        plan(
            [("Read the notes", "done"), ("Draft", "in_progress"), ("Review", "pending")],
            "Notes read.",
        ),
    )
    tasks = plans.locator("ol.checklist li")
    await expect(tasks).to_have_text(["Read the notes", "Draft", "Review"])
    await expect(plans).to_have_count(1)  # the newer plan replaced the older one
    await expect(plans.locator(".body")).to_contain_text("Plan: 1 of 3 tasks done. Notes read.")
    boxes = tasks.locator("input[type=checkbox]")
    assert await boxes.evaluate_all("bs => bs.map((b) => [b.checked, b.indeterminate])") == [
        [True, False],
        [False, True],
        [False, False],
    ]
    await expect(boxes.first).to_be_disabled()
    await expect(tasks.nth(0)).to_have_attribute("data-status", "done")
    await expect(boxes.nth(1)).to_have_attribute("aria-label", "in progress")
    await ui.screenshot("conversation-plan")


async def test_the_header_stays_while_200_messages_scroll_in_their_pane(
    ui: OpenPage, bus: MessageBus
) -> None:
    page = ui.page
    await page.set_viewport_size({"width": 1280, "height": 800})
    workflow_id, _ = await start_run(page, "Talk a lot")
    await page.locator("li.msg-request-input form").wait_for()
    await bus.post_many(
        workflow_id,
        [
            (create_compact_message(AgentMessageType.UPDATE, f"step {n} of 200"), None)
            for n in range(1, 201)
        ],
    )
    last = page.locator("li.msg-update", has_text="step 200 of 200")
    await expect(last).to_be_in_viewport()  # the pane follows new messages
    pane = page.locator("#messages")
    await pane.hover()
    await page.mouse.wheel(0, -5000)
    await expect(page.locator("li.msg-update", has_text="step 200 of 200")).not_to_be_in_viewport()
    sizes = await page.evaluate(
        """() => ({page: document.scrollingElement.scrollHeight, window: innerHeight,
                   scrolled: scrollY, pane: document.getElementById('messages').scrollTop})"""
    )
    assert sizes["page"] <= sizes["window"] and sizes["scrolled"] == 0, sizes
    header = await page.locator("header.topbar").bounding_box()
    assert header is not None and header["y"] == 0, header
    await expect(page.locator("header.topbar")).to_be_in_viewport()
    await expect(page.locator("#send")).to_be_in_viewport()
    await pane.focus()  # the pane is focusable, so it scrolls by keyboard too
    await page.keyboard.press("End")
    await expect(last).to_be_in_viewport()
    await page.keyboard.press("PageUp")
    await ui.screenshot("conversation-200-messages")


async def test_a_phone_width_page_has_no_horizontal_scroll(ui: OpenPage) -> None:
    page = ui.page
    await page.set_viewport_size({"width": 390, "height": 844})
    await start_run(page, "On my phone")
    await page.locator("li.msg-request-input form").wait_for()
    widths = await page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1] == 390, widths
    await expect(page.locator("header.topbar")).to_be_in_viewport()
    await expect(page.locator("#send")).to_be_in_viewport()
    links = page.get_by_role("navigation", name="Pages").get_by_role("link")
    await expect(links).to_have_text(["Conversation", "Runs", "Inbox", "Schedules", "Evaluations"])
    hrefs = await links.evaluate_all("links => links.map((a) => new URL(a.href).pathname)")
    assert hrefs == ["/ui/", "/ui/runs", "/ui/inbox", "/ui/schedules", "/ui/evaluations"]
    await expect(links.first).to_have_attribute("aria-current", "page")
    await ui.screenshot("conversation-phone")
