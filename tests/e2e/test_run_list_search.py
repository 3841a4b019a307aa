"""``GET /runs`` searched as the runs page searches it (issue 29): by a part of the
run id (any case), by conversation, by creation time, with the graph and status
filters and paging; a bad time range is a 422 naming the field."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from spindle.client import AsyncSpindleClient, ClientConfig
from tests.e2e.conftest import Caller, SpindleStack, example_graph
from tests.e2e.run_driver import start, wait_for_status

pytestmark = pytest.mark.e2e


async def test_runs_are_found_by_id_conversation_and_time(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    name = f"pipeline-search-{unique}"
    spec = {**example_graph("pipeline"), "name": name}
    before = datetime.now(UTC) - timedelta(seconds=1)
    alone = [await start(http, graph_spec=spec, input={"text": f"note {i}"}) for i in range(3)]
    conversation = f"conv-{unique}"
    talk = await start(
        http, graph_spec=spec, input={"text": "in a conversation"}, conversation_id=conversation
    )
    runs = [*alone, talk]
    for run in runs:
        await wait_for_status(http, run["workflow_id"], {"completed"})
    after = datetime.now(UTC) + timedelta(seconds=1)

    async def listed(**params: object) -> tuple[list[str], int]:
        reply = await http.get("/runs", params={"graph": name, **params})
        assert reply.status_code == 200, reply.text
        page = reply.json()
        return [r["workflow_id"] for r in page["runs"]], page["total"]

    # A part of one id, in another case, finds that run only.
    target = alone[1]["workflow_id"]
    part = target[-12:-2].upper()
    assert await listed(id=part) == ([target], 1)
    assert await listed(id="no-such-run-id") == ([], 0)
    # Characters of a regular expression are text, not a pattern.
    assert await listed(id=".*") == ([], 0)

    # The conversation's runs only; the run says its conversation.
    ids, total = await listed(conversation=conversation)
    assert (ids, total) == ([talk["workflow_id"]], 1)
    page = (await http.get("/runs", params={"conversation": conversation})).json()
    assert page["runs"][0]["conversation_id"] == conversation
    assert page["runs"][0]["status"] == "completed"

    # Creation time: a window around the runs, and one after them.
    ids, total = await listed(
        created_after=before.isoformat(), created_before=after.isoformat(), limit=2
    )
    assert total == 4 and ids == [r["workflow_id"] for r in runs][::-1][:2]
    ids, total = await listed(
        created_after=before.isoformat(), created_before=after.isoformat(), limit=2, offset=2
    )
    assert ids == [r["workflow_id"] for r in runs][::-1][2:]
    assert await listed(created_after=after.isoformat()) == ([], 0)
    assert await listed(created_before=before.isoformat()) == ([], 0)
    # Filters add up.
    assert await listed(id=part, status="paused") == ([], 0)
    assert await listed(id=part, status="completed") == ([target], 1)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        (
            {"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"},
            "created_after",
        ),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_before": "2026-01-01T00:00:00"}, "created_before"),  # no offset
        ({"conversation": "has space"}, "conversation"),
        ({"id": ""}, "id"),
        ({"id": "x" * 201}, "id"),
    ],
)
async def test_bad_search_parameters_are_refused_naming_them(
    http: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    reply = await http.get("/runs", params=params)
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert field in reply.text


async def test_the_sdk_searches_as_the_page_does(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    unique: str,
) -> None:
    name = f"pipeline-sdk-search-{unique}"
    spec = {**example_graph("pipeline"), "name": name}
    conversation = f"conv-sdk-{unique}"
    before = datetime.now(UTC) - timedelta(seconds=1)
    plain = (await start(http, graph_spec=spec, input={"text": "plain"}))["workflow_id"]
    talk = await start(http, graph_spec=spec, input={"text": "t"}, conversation_id=conversation)
    after = datetime.now(UTC) + timedelta(seconds=1)
    config = ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)
    async with AsyncSpindleClient(config) as client:
        page = await client.list_runs(graph=name, id_contains=plain[-10:].upper())
        assert [r.workflow_id for r in page.runs] == [plain]
        page = await client.list_runs(conversation=conversation)
        assert [r.workflow_id for r in page.runs] == [talk["workflow_id"]]
        page = await client.list_runs(graph=name, created_after=before, created_before=after)
        assert {r.workflow_id for r in page.runs} == {plain, talk["workflow_id"]}
        page = await client.list_runs(graph=name, created_after=after)
        assert page.runs == [] and page.total == 0
