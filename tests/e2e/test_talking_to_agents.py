"""Talking to a running agent over HTTP (docs/conversations.md): user messages to an
interactive agent through both signal routes, COMPLETE, uploads heard, a message to a
workstream, and what is refused (409 naming why, other users and tenants).

Real gateway and worker processes, the offline model: it answers the latest user
message (``(offline model) You asked: "<text>"``, or with the calculator's result
``<expression> = <value>``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.e2e.run_driver import T, start, wait_for_status
from tests.e2e.sse_client import SseConnection, SseEvent, open_sse

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

WAIT = 30.0
PROBLEM = "application/problem+json"


def chat_spec(name: str, **params: Any) -> dict[str, Any]:
    """One interactive agent with the calculator."""
    return {
        "name": name,
        "entry": "chat",
        "nodes": [
            {
                "id": "chat",
                "type": "agent",
                "params": {
                    "prompt": "{{ input.message }}",
                    "tools": ["calculator"],
                    "interactive": True,
                    **params,
                },
            }
        ],
        "edges": [],
    }


def main_of(kind: int) -> Any:
    """An SSE predicate: a message of the main workstream of this type."""

    def check(event: SseEvent) -> bool:
        message = event.json()
        return not message.get("w") and message["t"] == kind

    return check


def signal_url(run: dict[str, Any], prefix: str = "") -> str:
    return f"{prefix}/runs/{run['workflow_id']}/{run['run_id']}/signal/UserInput"


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM), reply.headers
    body: dict[str, Any] = reply.json()
    return body


@pytest.fixture
async def chat(http: httpx.AsyncClient, unique: str) -> dict[str, Any]:
    """alice's interactive agent, started on "what is 6 * 7"."""
    return await start(
        http, graph_spec=chat_spec(f"talk-{unique}"), input={"message": "what is 6 * 7"}
    )


@pytest.fixture
async def stream(http: httpx.AsyncClient, chat: dict[str, Any]) -> AsyncIterator[SseConnection]:
    url = f"/runs/{chat['workflow_id']}/{chat['run_id']}/stream"
    async with open_sse(http, url) as connection:
        assert connection.response.status_code == 200
        await connection.until(main_of(T.IDLE), timeout=WAIT)  # answered, waiting
        yield connection


async def say(
    http: httpx.AsyncClient, stream: SseConnection, url: str, text: str, **extra: Any
) -> tuple[dict[str, Any], str]:
    """Send ``text``; return its QUESTION echo and the answer, once IDLE again."""
    reply = await http.post(url, json={"message": text, **extra})
    assert reply.status_code == 200, reply.text
    assert reply.json()["status"] == "accepted"
    question = (await stream.until(main_of(T.QUESTION), timeout=WAIT)).json()
    answer = (await stream.until(main_of(T.ANSWER), timeout=WAIT)).json()["m"]
    await stream.until(main_of(T.IDLE), timeout=WAIT)
    return question, answer


async def test_messages_reach_the_interactive_agent_on_both_routes_and_complete_ends_it(
    http: httpx.AsyncClient, chat: dict[str, Any], stream: SseConnection
) -> None:
    question, answer = await say(
        http,
        stream,
        signal_url(chat),
        "and 2 + 3",
        client_message_id="m-1",
        metadata={"page": "p1"},
    )
    assert question["m"] == "and 2 + 3"
    assert question["d"]["client_message_id"] == "m-1"
    assert question["d"]["metadata"] == {"page": "p1"}
    assert question["d"]["node_id"] == "chat" and question["d"]["user_id"]
    assert "2 + 3 = 5" in answer

    # A retry with the same client_message_id is taken once.
    again = await http.post(
        signal_url(chat), json={"message": "and 2 + 3", "client_message_id": "m-1"}
    )
    # (The same update id: Temporal answers with the first outcome, and nothing is echoed.)
    assert again.status_code == 200 and again.json()["status"] == "accepted"

    # The @vertesia/client route, and the one without the run id.
    question, answer = await say(
        http, stream, signal_url(chat, "/api/v1/workflows"), "and 4 * 4", client_message_id="m-2"
    )
    assert question["d"]["client_message_id"] == "m-2" and "4 * 4 = 16" in answer
    plain = f"/runs/{chat['workflow_id']}/signal/UserInput"
    question, answer = await say(http, stream, plain, "and 9 - 1")
    assert "9 - 1 = 8" in answer
    questions = [e.json()["m"] for e in stream.events if main_of(T.QUESTION)(e)]
    assert questions == ["and 2 + 3", "and 4 * 4", "and 9 - 1"]  # the retry not echoed

    done = await http.post(f"/runs/{chat['workflow_id']}/complete")
    assert done.status_code == 200, done.text
    assert done.json()["node_id"] == "chat"
    ended = await stream.until(lambda e: e.json()["t"] == T.COMPLETE, timeout=WAIT)
    assert ended.json()["w"] == "chat" and "COMPLETE" in ended.json()["m"]
    described = await wait_for_status(http, chat["workflow_id"], {"completed"})
    assert "9 - 1 = 8" in str(described["output"])

    # Finished: a message and a second COMPLETE are refused, naming why.
    late = problem(await http.post(signal_url(chat), json={"message": "hello?"}), 409)
    assert late["detail"]
    assert problem(await http.post(f"/runs/{chat['workflow_id']}/complete"), 409)["detail"]


async def test_an_upload_is_posted_and_the_agents_next_turn_is_told(
    http: httpx.AsyncClient, chat: dict[str, Any], stream: SseConnection
) -> None:
    files = f"/runs/{chat['workflow_id']}/{chat['run_id']}/files"
    stored = await http.post(files, files={"file": ("notes.txt", b"twelve bytes", "text/plain")})
    assert stored.status_code == 201, stored.text
    posted = (await stream.until(main_of(T.SYSTEM), timeout=WAIT)).json()
    assert "notes.txt" in posted["m"] and posted["d"]["size"] == 12

    # A file already stored, announced through the signal route.
    again = await http.post(
        f"/runs/{chat['workflow_id']}/{chat['run_id']}/signal/FileUploaded",
        json={"name": "notes.txt"},
    )
    assert again.status_code == 200, again.text
    assert (await stream.until(main_of(T.SYSTEM), timeout=WAIT)).json()["d"]["name"] == "notes.txt"
    unknown = await http.post(
        f"/runs/{chat['workflow_id']}/{chat['run_id']}/signal/FileUploaded",
        json={"name": "nothing.txt"},
    )
    assert "nothing.txt" in problem(unknown, 404)["detail"]

    await say(http, stream, signal_url(chat), "what did I upload?")
    reply = await http.get(f"/runs/{chat['workflow_id']}/conversation")
    assert reply.status_code == 200, reply.text
    messages = reply.json()["messages"]
    told = [m for m in messages if m["role"] == "system" and "notes.txt" in (m["content"] or "")]
    assert len(told) == 2 and all("12 bytes" in m["content"] for m in told), messages
    asked = next(i for i, m in enumerate(messages) if m["content"] == "what did I upload?")
    assert messages.index(told[0]) > asked  # told with the message, at that turn boundary
    await http.post(f"/runs/{chat['workflow_id']}/complete")


async def test_others_are_refused_as_on_every_run_input_route(
    clients: dict[str, httpx.AsyncClient], chat: dict[str, Any], stream: SseConnection
) -> None:
    body = {"message": "let me in"}
    bob = clients["bob"]  # same tenant, not the owner, no run-control role
    assert problem(await bob.post(signal_url(chat), json=body), 403)["detail"]
    assert (await bob.post(f"/runs/{chat['workflow_id']}/complete")).status_code == 403
    mallory = clients["mallory"]  # another tenant: as an unknown run
    assert problem(await mallory.post(signal_url(chat), json=body), 404)["detail"]
    assert (await mallory.post(f"/runs/{chat['workflow_id']}/complete")).status_code == 404
    files = f"/runs/{chat['workflow_id']}/{chat['run_id']}/signal/FileUploaded"
    assert (await mallory.post(files, json={"name": "x.txt"})).status_code == 404
    assert (await clients["anonymous"].post(signal_url(chat), json=body)).status_code == 401
    # carol (admin: a run-control role) may.
    _, answer = await say(clients["carol"], stream, signal_url(chat), "and 1 + 1")
    assert "1 + 1 = 2" in answer
    assert (await clients["alice"].post(f"/runs/{chat['workflow_id']}/complete")).status_code == 200


def waiting_on_a_workstream(name: str) -> dict[str, Any]:
    """The main workstream only waits for an interactive child: no agent, no prompt."""
    return {
        "name": name,
        "entry": "helper",
        "nodes": [
            {
                "id": "helper",
                "type": "workstream",
                "params": {
                    "task": "{{ input.message }}",
                    "interactive": True,
                    "wait": True,
                    "agent": {"tools": ["calculator"]},
                },
            }
        ],
        "edges": [],
    }


async def test_no_listener_is_a_409_naming_why_and_a_workstream_id_reaches_the_workstream(
    http: httpx.AsyncClient, unique: str
) -> None:
    run = await start(
        http,
        graph_spec=waiting_on_a_workstream(f"talk-ws-{unique}"),
        input={"message": "what is 3 * 3"},
    )
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
    async with open_sse(http, url) as stream:
        first = await stream.until(
            lambda e: e.json().get("w") == "ws-1" and e.json()["t"] == T.ANSWER, timeout=WAIT
        )
        assert "3 * 3 = 9" in first.json()["m"]

        refused = problem(await http.post(signal_url(run), json={"message": "anyone?"}), 409)
        assert (
            "no agent of the main workstream is listening and no prompt waits" in refused["detail"]
        )

        sent = await http.post(
            signal_url(run), json={"message": "and 5 * 5", "workstream_id": "ws-1"}
        )
        assert sent.status_code == 200, sent.text
        assert sent.json()["message"].startswith("message m-")
        answered = await stream.until(
            lambda e: e.json().get("w") == "ws-1" and e.json()["t"] == T.ANSWER, timeout=WAIT
        )
        assert "5 * 5 = 25" in answered.json()["m"]
        # The workstream route is the same mechanism (and names an unknown workstream).
        direct = await http.post(
            f"/runs/{run['workflow_id']}/workstreams/ws-1/messages", json={"message": "and 2 * 8"}
        )
        assert direct.status_code == 202, direct.text
        answered = await stream.until(
            lambda e: e.json().get("w") == "ws-1" and e.json()["t"] == T.ANSWER, timeout=WAIT
        )
        assert "2 * 8 = 16" in answered.json()["m"]
        unknown = await http.post(signal_url(run), json={"message": "hi", "workstream_id": "ws-9"})
        assert "workstream 'ws-9' was not found" in problem(unknown, 404)["detail"]
        empty = await http.post(signal_url(run), json={"workstream_id": "ws-1"})
        assert problem(empty, 422)["errors"][0]["field"] == "message"
        stopped = await http.post(f"/runs/{run['workflow_id']}/workstreams/ws-1/terminate")
        assert stopped.status_code == 202, stopped.text
    await wait_for_status(http, run["workflow_id"], {"completed", "failed"})


async def test_the_agent_reads_an_uploaded_file_with_read_file(
    http: httpx.AsyncClient, unique: str
) -> None:
    spec = chat_spec(f"talk-files-{unique}", tools=["read_file"])
    run = await start(http, graph_spec=spec, input={"message": "hi"})
    url = f"/runs/{run['workflow_id']}/{run['run_id']}/stream"
    async with open_sse(http, url) as stream:
        await stream.until(main_of(T.IDLE), timeout=WAIT)
        files = f"/runs/{run['workflow_id']}/{run['run_id']}/files"
        body = b"The launch code is 4711.\n"
        stored = await http.post(files, files={"file": ("notes.txt", body, "text/plain")})
        assert stored.status_code == 201, stored.text
        # The offline model calls read_file with the message as the path.
        _, answer = await say(http, stream, signal_url(run), "notes.txt")
        assert "read_file" in answer and "The launch code is 4711." in answer
        _, refused = await say(http, stream, signal_url(run), "../notes.txt")
        assert "read_file failed" in refused and "is refused" in refused
        reply = await http.get(f"/runs/{run['workflow_id']}/conversation")
        notices = [m["content"] for m in reply.json()["messages"] if m["name"] == "upload"]
        assert len(notices) == 1 and "Read it with the read_file tool" in notices[0]
        assert (await http.post(f"/runs/{run['workflow_id']}/complete")).status_code == 200
