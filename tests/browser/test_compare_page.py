"""The compare page (``/ui/compare?a=..&b=..``; docs/replay-and-compare.md): a run and
its fork with a changed edge condition side by side: the nodes both ran, the node
only each side ran, the differing final output and its diff, and the totals; at a
desktop and a phone width. Headless Chromium against the browser stack."""

from __future__ import annotations

import copy
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, expect

from tests.browser.signed_in import PHONE, fits_width, signed_in
from tests.e2e.conftest import Caller, SpindleStack, example_graph
from tests.e2e.run_driver import start, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_a_fork_with_a_changed_edge_side_by_side(
    chromium: Browser,
    browser_stack: SpindleStack,
    api: httpx.AsyncClient,
    browser_user: Caller,
    artifacts_dir: Path,
) -> None:
    pipeline = example_graph("pipeline")
    source = await start(api, graph_spec=pipeline, input={"text": "a calm and pleasant day"})
    await wait_for_status(api, source["workflow_id"], {"completed"})
    swapped = copy.deepcopy(pipeline)
    for edge in swapped["edges"]:
        if edge["to"] == "escalation":
            edge["when"] = "mood.label != 'negative'"
        elif edge["to"] == "summary":
            edge["when"] = "mood.label == 'negative'"
    reply = await api.post(f"/runs/{source['workflow_id']}/fork", json={"graph_spec": swapped})
    assert reply.status_code == 201, reply.text
    fork_id = reply.json()["workflow_id"]
    await wait_for_status(api, fork_id, {"completed"})

    path = f"/ui/compare?a={source['workflow_id']}&b={fork_id}"
    shots = artifacts_dir / "browser"
    async with signed_in(chromium, browser_stack, browser_user, path, shots) as ui:
        page = ui.page
        result = page.locator("#compare-result")
        await expect(result).to_be_visible()
        await expect(page.locator("#relation")).to_contain_text(f"{fork_id} is a fork of")
        rows = page.locator("#nodes tbody tr")
        await expect(rows).to_have_count(4)
        for node in ("keywords", "mood"):
            row = page.locator(f"#nodes tr[data-node={node}]")
            await expect(row).not_to_have_class("differs")
            await expect(row).to_contain_text("same")
        summary = page.locator("#nodes tr[data-node=summary]")
        await expect(summary).to_have_class("only-one")
        await expect(summary.locator("td").nth(1)).to_contain_text("did not run")
        escalation = page.locator("#nodes tr[data-node=escalation]")
        await expect(escalation.locator("td").nth(0)).to_contain_text("did not run")
        await expect(page.locator("#output-same")).to_have_text("The final outputs differ.")
        diff = page.locator("#output-diff tbody tr").filter(has_text="$.priority")
        await expect(diff).to_contain_text("changed")
        await expect(diff).to_contain_text('"high"')
        await expect(page.locator("#totals tr[data-total=tool-calls] td").nth(0)).to_have_text("2")
        await ui.screenshot("compare-fork")
        # A run of another graph: the gateway's reason is shown.
        other = await start(api, graph_spec={**pipeline, "name": "other"}, input={"text": "x"})
        await page.fill("#run-b", other["workflow_id"])
        await page.click("#compare-form button[type=submit]")
        await expect(page.locator("#compare-error")).to_contain_text("not related")
        await expect(result).to_be_hidden()

    # The fork's run view links to this page (its "Forked from" fact).
    runs = f"/ui/runs#run={fork_id}"
    async with signed_in(chromium, browser_stack, browser_user, runs, shots) as ui:
        page = ui.page
        await page.locator("dd[data-fact=forked-from] a").click()
        await expect(page).to_have_url(f"{browser_stack.base_url}{path}")
        await expect(page.locator("#nodes tbody tr")).to_have_count(4)

    # From the run list: tick the two runs, follow "Compare the two picked runs".
    async with signed_in(chromium, browser_stack, browser_user, "/ui/runs", shots) as ui:
        page = ui.page
        await page.fill("#filter-id", fork_id)
        compare = page.locator("#compare-picked")
        await expect(compare).to_have_attribute("aria-disabled", "true")
        await page.get_by_label(f"Pick {fork_id} to compare").check()
        await expect(compare).to_have_text("Compare 1 of 2")
        await page.fill("#filter-id", source["workflow_id"])
        await page.get_by_label(f"Pick {source['workflow_id']} to compare").check()
        await expect(compare).to_have_attribute("aria-disabled", "false")
        await compare.click()
        await expect(page).to_have_url(
            f"{browser_stack.base_url}/ui/compare?a={fork_id}&b={source['workflow_id']}"
        )
        await expect(page.locator("#nodes tbody tr")).to_have_count(4)

    async with signed_in(chromium, browser_stack, browser_user, path, shots, PHONE) as ui:
        await expect(ui.page.locator("#compare-result")).to_be_visible()
        assert await fits_width(ui.page)
        await ui.screenshot("compare-phone")
