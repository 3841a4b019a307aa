"""The evaluations page (``/ui/evaluations``; docs/replay-and-compare.md#evaluations):
the tenant's evaluations listed, one evaluation's summary (same / changed / failed,
checks passed per name, totals) and its per-run table with links to each compare; at
a desktop and a phone width. Headless Chromium against the browser stack."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, expect

from tests.browser.signed_in import PHONE, fits_width, signed_in
from tests.e2e.conftest import Caller, SpindleStack, example_graph
from tests.e2e.run_driver import start, wait_for_status
from tests.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_an_evaluation_listed_summed_up_and_per_run(
    chromium: Browser,
    browser_stack: SpindleStack,
    api: httpx.AsyncClient,
    browser_user: Caller,
    artifacts_dir: Path,
) -> None:
    pipeline = example_graph("pipeline")
    sources = []
    for text in ("a great happy day", "a plain day"):
        run = await start(api, graph_spec=pipeline, input={"text": text})
        sources.append(
            (await wait_for_status(api, run["workflow_id"], {"completed"}))["workflow_id"]
        )
    stricter = copy.deepcopy(pipeline)
    for edge in stricter["edges"]:
        if edge["to"] == "escalation":
            edge["when"] = "mood.label != 'positive'"
        elif edge["to"] == "summary":
            edge["when"] = "mood.label == 'positive'"
    reply = await api.post(
        "/evaluations",
        json={
            "source": {"run_ids": sources},
            "candidate": {"graph_spec": stricter},
            "checks": [{"name": "kept", "expr": "source.output == candidate.output"}],
        },
    )
    assert reply.status_code == 201, reply.text
    evaluation_id = reply.json()["evaluation_id"]

    async def completed() -> dict[str, Any] | None:
        body: dict[str, Any] = (await api.get(f"/evaluations/{evaluation_id}")).json()
        return body if body["status"] == "completed" else None

    await eventually(completed, what="the evaluation completes", timeout=60)

    shots = artifacts_dir / "browser"
    path = f"/ui/evaluations#id={evaluation_id}"
    async with signed_in(chromium, browser_stack, browser_user, path, shots) as ui:
        page = ui.page
        await expect(page.locator("#eval-list tbody")).to_contain_text(evaluation_id)
        await expect(page.locator("#eval-status")).to_have_text("completed")
        summary = page.locator("#eval-summary")
        await expect(summary).to_contain_text("Same1")
        await expect(summary).to_contain_text("Changed1")
        await expect(summary).to_contain_text("Failed0")
        check = page.locator("#eval-checks tbody tr")
        await expect(check).to_have_count(1)
        await expect(check.locator("td")).to_have_text(["kept", "1", "1"])
        rows = page.locator("#eval-runs tbody tr")
        await expect(rows).to_have_count(2)
        await expect(rows.nth(0).locator("td").nth(2)).to_have_text("same")
        await expect(rows.nth(1).locator("td").nth(2)).to_have_text("changed")
        await expect(rows.nth(1).locator("td").nth(3)).to_contain_text("+escalation")
        compare = rows.nth(1).get_by_role("link", name="compare")
        assert (await compare.get_attribute("href") or "").startswith(
            f"/ui/compare?a={sources[1]}&b="
        )
        await ui.screenshot("evaluation")
    async with signed_in(chromium, browser_stack, browser_user, path, shots, PHONE) as ui:
        await expect(ui.page.locator("#eval-runs tbody tr")).to_have_count(2)
        assert await fits_width(ui.page)
