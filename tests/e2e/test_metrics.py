"""``GET /metrics`` on the gateway: a scraper sees runs start and streams deliver.

The gateway process is shared by the e2e session, so values are compared before
and after; other tests only ever add to the counters.
"""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.run_driver import T, answer, assert_contiguous, start
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e


async def scrape(http: httpx.AsyncClient) -> dict[str, float]:
    """Unlabelled samples of the gateway's metrics, scraped without credentials."""
    async with httpx.AsyncClient(base_url=str(http.base_url)) as anonymous:
        reply = await anonymous.get("/metrics")
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("text/plain")
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(reply.text)
        for sample in family.samples
        if not sample.labels
    }


async def test_metrics_count_the_run_its_stream_and_a_reconnect(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    before = await scrape(http)
    assert "agent_runs_started_total" in before

    run = await start(http, graph="approval-flow", input={"topic": "metrics"})
    after_start = await scrape(http)
    assert after_start["agent_runs_started_total"] >= before["agent_runs_started_total"] + 1

    async with open_sse(http, run["stream_url"]) as sse:
        first = await sse.next_event()
        await sse.until_type(T.REQUEST_INPUT)  # the run waits: the stream stays open
        during = await scrape(http)
        assert during["spindle_sse_streams_open"] >= before["spindle_sse_streams_open"] + 1
        reply = await answer(http, run, {"data": {"decision": "approve"}})
        assert reply.status_code == 200, reply.text
        await sse.read_to_end(timeout=60)
        events = sse.events
    assert events[0] == first and events[-1].json()["t"] == T.COMPLETE
    assert_contiguous(events)
    rest = events[1:]

    # A client that lost the connection after the first message comes back.
    async with open_sse(http, run["stream_url"], headers={"Last-Event-ID": first.id or ""}) as sse:
        resumed = await sse.read_to_end(timeout=30)
    assert [e.id for e in resumed] == [e.id for e in rest]

    after = await scrape(http)
    delivered = after["spindle_sse_messages_delivered_total"]
    assert delivered >= before["spindle_sse_messages_delivered_total"] + len(events) + len(resumed)
    assert after["spindle_sse_reconnects_total"] >= before["spindle_sse_reconnects_total"] + 1

    async def streams_closed() -> bool:
        now = await scrape(http)
        return now["spindle_sse_streams_open"] <= before["spindle_sse_streams_open"]

    closed: bool = await eventually(streams_closed, what="open streams back down", timeout=10)
    assert closed
