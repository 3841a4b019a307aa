"""One cursor on MCP Tasks: a 1,002-message run started as an MCP task
(``tools/call`` with ``task``) and read through 100 disconnects at random points,
half while it runs and half after it ended and Redis forgot it (from the
archive), each reconnect a ``tasks/result`` with a ``progressToken`` and
``_meta["spindle/afterSeq"]`` set to the last ``_meta["spindle/seq"]`` seen
(docs/protocols/mcp.md, "Tasks"). MCP's promise is the run's *progress*
messages (docs/protocols/mcp.md, "Resume by cursor"), then the result: here
every seq but the run's last (its end, answered as the ``tasks/result``
response), each once, in order.

A dropped HTTP stream does not cancel its request (MCP: disconnection is not
cancellation), so the reader sends ``notifications/cancelled`` for each
``tasks/result`` it hangs up on, as a client that abandons a request does;
otherwise every abandoned follower reads the run to its end on the server."""

from __future__ import annotations

import itertools
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from spindle.shared.store.archive import RunArchive
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.resume_load import (
    DISCONNECTS,
    MESSAGES,
    assert_running,
    disconnect_points,
    end_and_forget,
    post_sse,
    read_through_disconnects,
    register_many_messages,
)
from tests.e2e.run_driver import T
from tests.e2e.sse_client import SseConnection, SseEvent
from tests.e2e.test_mcp_tasks import RawMcp, raw_mcp, start_task

pytestmark = pytest.mark.e2e

SEQ = "spindle/seq"
AFTER_SEQ = "spindle/afterSeq"
PROGRESS = "notifications/progress"
# The message types a task reports as progress (docs/protocols/mcp.md, "Resume by cursor").
PROGRESS_TYPES = {
    T.THOUGHT,
    T.PLAN,
    T.UPDATE,
    T.WARNING,
    T.ERROR,
    T.ANSWER,
    T.QUESTION,
    T.BATCH_PROGRESS,
}


def progress_of(event: SseEvent) -> dict[str, Any] | None:
    """The params of a progress notification (None: another message)."""
    message: dict[str, Any] = event.json()
    assert "error" not in message, message
    if message.get("method") != PROGRESS:
        return None
    params: dict[str, Any] = message["params"]
    return params


def task_result(session: RawMcp, task_id: str, token: str, after: int) -> dict[str, Any]:
    meta = {"progressToken": token, AFTER_SEQ: after}
    params = {"taskId": task_id, "_meta": meta}
    return {"jsonrpc": "2.0", "id": next(session.ids), "method": "tasks/result", "params": params}


async def cancel(session: RawMcp, request_id: int) -> None:
    note = {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": request_id, "reason": "the reader hung up"},
    }
    sent = await session.http.post("/mcp", json=note, headers=session._headers())
    assert sent.status_code == 202, sent.text


async def archived_types(stack: SpindleStack, workflow_id: str) -> dict[int, int]:
    """seq -> message type of every message the run posted (from the archive)."""
    archive = RunArchive.from_settings(stack.settings)
    try:
        stored = await archive.messages(workflow_id)
    finally:
        await archive.close()
    return {m.seq: SseEvent(data=m.raw.decode()).json()["t"] for m in stored}


async def test_mcp_task_resumes_by_cursor_through_100_disconnects_live_and_archived(
    stack: SpindleStack, callers: dict[str, Caller], http: httpx.AsyncClient, unique: str
) -> None:
    graph = await register_many_messages(http, unique)
    async with raw_mcp(stack, callers["alice"]) as session:
        task_id = await start_task(session, graph, {"text": "one two three"})
        tokens = (f"resume-{n}" for n in itertools.count())
        token = {"now": ""}

        @asynccontextmanager
        async def connect(cursor: str | None) -> AsyncIterator[SseConnection]:
            token["now"] = next(tokens)
            body = task_result(session, task_id, token["now"], int(cursor or 0))
            async with post_sse(session.http, "/mcp", body, session._headers()) as sse:
                yield sse
            if not sse.ended:
                # Dropping the stream does not cancel the request (MCP: a disconnect
                # is not a cancellation): a client that gives up on it says so.
                await cancel(session, body["id"])

        def cursor_of(event: SseEvent) -> str | None:
            progress = progress_of(event)
            if progress is None:
                return None
            # Each connection's notifications carry that tasks/result's own token.
            assert progress["progressToken"] == token["now"], progress
            assert progress["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
            return str(progress["_meta"][SEQ])

        async def running() -> None:
            await assert_running(http, task_id)

        async def ended() -> None:
            await end_and_forget(http, stack, task_id)

        rng = random.Random(30_5)
        reading = await read_through_disconnects(
            connect,
            cursor_of,
            # MESSAGES - 1 progress notifications, then the result: points fall among them.
            points=disconnect_points(rng, MESSAGES - 1),
            still_running=running,
            after_the_end=ended,
        )

        assert reading.disconnects_during + reading.disconnects_after == DISCONNECTS
        assert reading.disconnects_during == DISCONNECTS // 2
        *notes, last = reading.events
        seqs = [p["_meta"][SEQ] for p in map(progress_of, notes) if p is not None]
        assert len(seqs) == len(notes), "only progress notifications before the result"
        # The promise: every progress message once, in order: here every message
        # but the run's end (COMPLETE), which is the tasks/result response below.
        types = await archived_types(stack, task_id)
        assert len(types) == MESSAGES
        assert types[MESSAGES] == T.COMPLETE
        assert {types[seq] for seq in range(1, MESSAGES)} <= PROGRESS_TYPES
        assert seqs == list(range(1, MESSAGES)), "no gap, no duplicate, in order"
        assert all(p["progress"] == p["_meta"][SEQ] for p in map(progress_of, notes) if p)
        result = last.json()["result"]
        run = (await http.get(f"/runs/{task_id}")).json()
        assert run["status"] == "completed"
        assert result["structuredContent"] == run["output"]

        # From the last seq seen, from the archive alone: no progress, just the result.
        after_last = task_result(session, task_id, "tail", seqs[-1])
        async with post_sse(session.http, "/mcp", after_last, session._headers()) as sse:
            (only,) = await sse.read_to_end(timeout=30)
        assert only.json()["result"]["structuredContent"] == run["output"]
        # From the start, after the end: exactly what the 101 connections read.
        replay_all = task_result(session, task_id, "all", 0)
        async with post_sse(session.http, "/mcp", replay_all, session._headers()) as sse:
            *replayed, _ = await sse.read_to_end(timeout=60)
        assert [p["_meta"][SEQ] for p in map(progress_of, replayed) if p] == seqs
