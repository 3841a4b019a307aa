"""The approval (human-in-the-loop) example, driven over HTTP like a client would."""

from __future__ import annotations

import itertools

import httpx
import orjson
import pytest

from tests.e2e.run_driver import (
    T,
    answer,
    assert_contiguous,
    gzip_updates,
    start,
    updates,
    wait_for_status,
)
from tests.e2e.sse_client import open_sse

pytestmark = pytest.mark.e2e


async def test_approval_run_streams_asks_and_completes(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "Q3 budget"})
    assert run["workflow_id"].startswith("run-") and run["run_id"]
    assert run["stream_url"].endswith(f"/runs/{run['workflow_id']}/{run['run_id']}/stream")

    async with open_sse(http, run["stream_url"]) as sse:
        assert sse.response.status_code == 200
        assert sse.response.headers["content-type"].startswith("text/event-stream")
        assert sse.response.headers["cache-control"] == "no-cache"
        assert sse.response.headers["x-accel-buffering"] == "no"
        assert "content-encoding" not in sse.response.headers

        ask = await sse.until_type(T.REQUEST_INPUT)
        details = ask.json()["d"]
        assert details["node_id"] == "review"
        assert details["ui_schema"]["properties"]["decision"]["enum"] == ["approve", "reject"]

        described = await wait_for_status(http, run["workflow_id"], {"paused"})
        assert described["pending_input"]["node_id"] == "review"
        assert described["pending_input"]["ui_schema"]["required"] == ["decision"]
        assert described["current_nodes"] == ["review"]
        assert [r["node_id"] for r in described["node_reports"]] == ["draft"]
        assert described["output"] is None, "no output until the run ends (not draft's)"
        assert described["temporal_ui_url"].endswith(f"/workflows/{run['workflow_id']}")

        reply = await answer(
            http,
            run,
            {"data": {"decision": "approve", "comment": "ship it"}, "client_message_id": "c-1"},
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "accepted"

        await sse.read_to_end(timeout=60)
        assert sse.ended, "the stream ends after the conversation's last message"

    streamed = [e.json() for e in sse.events]
    kinds = [m["t"] for m in streamed]
    assert kinds.count(T.REQUEST_INPUT) == 1
    question = next(m for m in streamed if m["t"] == T.QUESTION)
    assert question["d"]["client_message_id"] == "c-1"
    assert T.ANSWER in kinds[kinds.index(T.QUESTION) :]
    assert kinds[-1] == T.COMPLETE, "COMPLETE is the last message and ends the stream"
    assert streamed[-1]["d"]["status"] == "completed"
    assert_contiguous(sse.events)
    assert all(a["ts"] < b["ts"] for a, b in itertools.pairwise(streamed))
    assert sse.comments == [] or all(c.text == "keep-alive" for c in sse.comments)

    headers, history = await gzip_updates(http, run)
    assert headers["content-encoding"] == "gzip"
    assert "accept-encoding" in headers["vary"].lower()
    assert history == streamed, "phase 1 history = what the stream delivered, same order"
    assert await updates(http, run) == streamed  # uncompressed when gzip is not asked for

    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["output"]["decision"] == "approve"
    assert {"draft", "review", "route", "publish", "result"} <= {
        r["node_id"] for r in done["node_reports"]
    }
    assert not done["pending_input"]


async def test_invalid_answer_is_refused_and_the_run_keeps_waiting(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "hiring plan"})
    async with open_sse(http, run["stream_url"]) as sse:
        await sse.until_type(T.REQUEST_INPUT)

        bad = await answer(http, run, {"data": {"decision": "maybe"}})
        assert bad.status_code == 422, bad.text
        assert bad.headers["content-type"].startswith("application/problem+json")
        problem = bad.json()
        assert any("decision" in e["field"] and e["rule"] == "enum" for e in problem["errors"])

        missing = await answer(http, run, {"data": {"comment": "no decision"}})
        assert missing.status_code == 422
        assert any("decision" in e["field"] for e in missing.json()["errors"])

        still = await wait_for_status(http, run["workflow_id"], {"paused"})
        assert still["pending_input"]["node_id"] == "review"

        # A chat client's plain message fills the single required string.
        good = await answer(http, run, {"message": "reject", "client_message_id": "c-2"})
        assert good.status_code == 200, good.text
        await sse.read_to_end(timeout=60)

    kinds = [e.json()["t"] for e in sse.events]
    assert kinds.count(T.QUESTION) == 1, "refused answers leave no trace in the conversation"
    assert kinds[-1] == T.COMPLETE
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["output"]["decision"] == "reject"

    late = await answer(http, run, {"message": "approve"})
    assert late.status_code == 409, late.text


async def test_vertesia_prefix_serves_the_same_run(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="pipeline", input={"text": "The release is great, thanks!"})
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["output"]["priority"] == "normal"
    prefix = f"/api/v1/workflows/runs/{run['workflow_id']}/{run['run_id']}"
    reply = await http.get(f"{prefix}/updates")
    assert reply.status_code == 200
    messages = reply.json()["messages"]
    assert messages == await updates(http, run)
    assert messages[-1]["t"] == T.COMPLETE

    async with open_sse(http, f"{prefix}/stream") as sse:
        events = await sse.read_to_end(timeout=30)
    assert [e.json() for e in events] == messages
    assert_contiguous(events)
    assert orjson.loads(events[0].data)["ts"] == messages[0]["ts"]

    # Since the conversation has ended, a cursor at its end gets 204 (EventSource stops).
    async with open_sse(
        http, f"{prefix}/stream", headers={"Last-Event-ID": events[-1].id or ""}
    ) as sse:
        assert sse.response.status_code == 204
