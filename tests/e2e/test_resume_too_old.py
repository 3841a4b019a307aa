"""A cursor older than what is kept gets an explicit answer on every protocol, never
a silent jump; a cursor beyond the run's end too.

One 1,002-message run, started over AG-UI: Redis keeps its newest 1,000 messages
(``history_max_messages``: seqs 3..1002), and the archive retention
(``spindle archive prune``, ``archive_retention_days``) deletes the run from
the archive. Then seq 1 and 2 are kept nowhere: a cursor of 1 is refused by
name (SSE 410 problem, A2A -32602, AG-UI RUN_ERROR, each naming the oldest seq
kept), a cursor of 2 still resumes whole (3 is kept), and a cursor past the
end is refused with the run's last seq.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest

from spindle.cli.archive_retention import prune_runs
from spindle.shared.store.archive import RunArchive, utcnow
from tests.e2e.conftest import Caller, SpindleStack
from tests.e2e.resume_load import MESSAGES, post_sse, register_many_messages
from tests.e2e.run_driver import wait_for_status
from tests.e2e.sse_client import open_sse
from tests.polling import eventually

pytestmark = pytest.mark.e2e

OLDEST_KEPT = MESSAGES - 1000 + 1  # Redis keeps the newest history_max_messages


async def a2a_error(
    http: httpx.AsyncClient, alice: Caller, workflow_id: str, cursor: str
) -> dict[str, Any]:
    """The JSON-RPC error a ``SubscribeToTask`` from ``cursor`` gets."""
    headers = {**alice.headers, "A2A-Version": "1.0", "A2A-Last-Event-ID": cursor}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": workflow_id}}
    async with post_sse(http, "/", body, headers) as sse:
        raw = await sse.response.aread()
    text = raw.decode()
    payload = text.split("data:", 1)[1] if text.startswith(("data:", "event:")) else text
    error: dict[str, Any] = orjson.loads(payload.strip())["error"]
    return error


def error_data(error: dict[str, Any]) -> dict[str, Any]:
    """``data`` of a JSON-RPC error: A2A 1.0 sends it as google.rpc ErrorInfo metadata."""
    data = error.get("data")
    if isinstance(data, list):
        for detail in data:
            if isinstance(detail, dict) and "metadata" in detail:
                return dict(detail["metadata"])
    assert isinstance(data, dict), error
    return data


async def test_a_cursor_older_than_what_is_kept_is_refused_by_name_on_every_protocol(
    http: httpx.AsyncClient, stack: SpindleStack, callers: dict[str, Caller], unique: str
) -> None:
    graph = await register_many_messages(http, unique)
    url = f"/agui/{graph}"
    body = {
        "threadId": f"t-{unique}",
        "runId": "r1",
        "messages": [],
        "forwardedProps": {"input": {"text": "one two three"}},
    }
    async with post_sse(http, url, body, {}) as sse:
        first = await sse.next_event(timeout=60)
        snapshot = await sse.next_event(timeout=60)
    assert first.json()["type"] == "RUN_STARTED"
    workflow_id = snapshot.json()["snapshot"]["workflowId"]
    detail = await wait_for_status(http, workflow_id, {"completed"}, timeout=90)
    stream_url = f"/runs/{workflow_id}/{detail['run_id']}/stream"

    # The retention deletes the run from the archive, once it is all there.
    archive = RunArchive.from_settings(stack.settings)
    try:

        async def archived() -> bool:
            return len(await archive.messages(workflow_id)) == MESSAGES

        await eventually(archived, what="the run archived", timeout=60, interval=0.2)
        pruned = await prune_runs(
            archive, older_than=utcnow() + timedelta(days=1), workflow_ids=[workflow_id]
        )
        assert pruned.runs == 1 and pruned.messages == MESSAGES
    finally:
        await archive.close()

    # SSE: 410 naming the oldest seq kept; EventSource stops on it.
    async with open_sse(http, stream_url, headers={"Last-Event-ID": "1"}) as sse:
        assert sse.response.status_code == 410
        problem = orjson.loads(await sse.response.aread())
    (gone,) = problem["errors"]
    assert gone["rule"] == "CURSOR_EXPIRED" and gone["oldestSeq"] == OLDEST_KEPT, problem
    assert f"seq {OLDEST_KEPT}" in problem["detail"]
    # The cursor right before the oldest kept seq still resumes whole.
    async with open_sse(http, stream_url, params={"after": str(OLDEST_KEPT - 1)}) as sse:
        assert sse.response.status_code == 200
        rest = await sse.read_to_end(timeout=60)
    assert [e.seq for e in rest] == list(range(OLDEST_KEPT, MESSAGES + 1))
    # Beyond the end: 400 naming the run's last seq.
    async with open_sse(http, stream_url, headers={"Last-Event-ID": "5000"}) as sse:
        assert sse.response.status_code == 400
        beyond = orjson.loads(await sse.response.aread())
    assert beyond["errors"][0]["rule"] == "CURSOR_BEYOND_END"
    assert beyond["errors"][0]["lastSeq"] == MESSAGES

    # A2A: -32602 with the code and the oldest seq kept in its data.
    alice = callers["alice"]
    expired = await a2a_error(http, alice, workflow_id, "1")
    assert expired["code"] == -32602, expired
    data = error_data(expired)
    assert data["reason"] == "CURSOR_EXPIRED" and data["oldestSeq"] == str(OLDEST_KEPT), expired
    past = error_data(await a2a_error(http, alice, workflow_id, "5000.0"))
    assert past["reason"] == "CURSOR_BEYOND_END" and past["lastSeq"] == str(MESSAGES)

    # AG-UI: a reconnect re-reads its run's events from the first: a RUN_ERROR.
    async with post_sse(http, url, body, {"Last-Event-ID": "500.0"}) as sse:
        events = await sse.read_to_end(timeout=60)
    assert [e.json()["type"] for e in events] == ["RUN_ERROR"], [e.data for e in events]
    error = events[0].json()
    assert error["code"] == "CURSOR_EXPIRED" and error["metadata"]["oldestSeq"] == OLDEST_KEPT
