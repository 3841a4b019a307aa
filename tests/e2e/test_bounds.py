"""Every door checked: expression bombs, oversized headers, deep JSON-RPC and A2A
bodies, integers beyond 64 bits, and oversized or extra prompt answers, against the
real gateway and worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from spindle.gateway.http.body_limit import MAX_JSON_DEPTH
from tests.e2e.conftest import SpindleStack
from tests.e2e.jsonrpc_client import post, request
from tests.e2e.run_driver import answer, start, wait_for_status

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM), reply.headers
    body: dict[str, Any] = reply.json()
    assert body["status"] == status and body["detail"]
    return body


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def bomb(pipes: int) -> str:
    return "input" + " | [@,@]" * pipes


def calculator_graph(name: str, expression: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "calc",
        "nodes": [
            {
                "id": "calc",
                "type": "tool",
                "params": {"tool": "calculator", "args": {"expression": expression}},
            },
            {"id": "out", "type": "output"},
        ],
        "edges": [{"from": "calc", "to": "out"}],
    }


async def still_serving(http: httpx.AsyncClient, stack: SpindleStack) -> None:
    assert stack.gateway.alive(), stack.gateway.log_tail()
    run = await start(http, graph="pipeline", input={"text": "still here"})
    await wait_for_status(http, run["workflow_id"], {"completed"})


# --- expressions --------------------------------------------------------------------


@pytest.mark.parametrize("pipes", [23, 30])
@pytest.mark.parametrize(
    ("place", "where"),
    [("message", ("out", "params.message")), ("when", ("first", "edges[0].when"))],
)
async def test_expression_bombs_are_refused_at_registration(
    http: httpx.AsyncClient,
    examples: list[str],
    unique: str,
    pipes: int,
    place: str,
    where: tuple[str, str],
) -> None:
    name = f"bomb-{unique}"
    template = f"{{{{ {bomb(pipes)} }}}}" if place == "message" else "done"
    edge: dict[str, Any] = {"from": "first", "to": "out"}
    if place == "when":
        edge["when"] = bomb(pipes)
    spec = {
        "name": name,
        "entry": "first",
        "nodes": [
            {"id": "first", "type": "output"},
            {"id": "out", "type": "output", "params": {"message": template}},
        ],
        "edges": [edge],
    }
    body = problem(await http.put(f"/graphs/{name}", json=spec), 422)
    assert [(e["node"], e["field"], e["rule"]) for e in body["errors"]] == [
        (*where, "expression_too_costly")
    ]
    assert "expression too costly" in body["detail"]
    problem(await http.get(f"/graphs/{name}"), 404)
    # Inline in a run start too: refused, nothing started.
    problem(await http.post("/runs", json={"graph_spec": spec, "input": "x"}), 422)
    listed = await http.get("/runs", params={"graph": name})
    assert listed.json()["total"] == 0


async def test_a_template_that_blows_up_on_its_data_fails_its_node_only(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    # Nine doublings pass the static limit; over 100 KB of input they are 51 MB.
    spec = {
        "name": f"bomb-data-{unique}",
        "entry": "out",
        "nodes": [{"id": "out", "type": "output", "params": {"message": f"{{{{ {bomb(9)} }}}}"}}],
        "edges": [],
    }
    run = await start(http, graph_spec=spec, input="x" * 100_000)
    failed = await wait_for_status(http, run["workflow_id"], {"failed"})
    assert "node 'out'" in failed["error"] and "larger than" in failed["error"]
    await still_serving(http, stack)


# --- request headers ----------------------------------------------------------------


async def test_an_oversized_header_is_a_431_and_the_gateway_serves_on(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str]
) -> None:
    fine = await http.get("/healthz", headers={"X-Padding": "p" * 16_000})
    assert fine.status_code == 200
    reply = await http.get("/healthz", headers={"X-Padding": "p" * 200_000})
    body = problem(reply, 431)
    assert "SPINDLE_MAX_HEADER_BYTES" in body["detail"]
    await still_serving(http, stack)


async def test_a_32_mib_header_is_cut_off_not_read(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str]
) -> None:
    url = urlsplit(stack.base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ")
    sent = 0
    with contextlib.suppress(ConnectionError):  # the gateway closed it: what we want
        for _ in range(512):  # 32 MiB in 64 KiB pieces
            writer.write(b"p" * 65_536)
            await writer.drain()
            sent += 65_536
    head = b""
    with contextlib.suppress(ConnectionError):
        head = await asyncio.wait_for(reader.read(200), timeout=10)
    writer.close()
    # Either the 431 arrived before the reset or the connection was cut: never a 200.
    assert sent < 32 * 1024 * 1024 or head.startswith(b"HTTP/1.1 431"), (sent, head)
    assert not head.startswith(b"HTTP/1.1 200")
    await still_serving(http, stack)


# --- JSON-RPC and A2A bodies --------------------------------------------------------


async def test_deep_json_rpc_params_are_an_invalid_request_and_store_nothing(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = f"deep-task-{unique}"
    body = request("tasks.create", {"name": name, "inputs": {"d": "__DEEP__"}}, "deep-1")
    content = json.dumps(body).replace('"__DEEP__"', nested(300)).encode()
    reply = await http.post("/", content=content, headers=JSON)
    assert reply.status_code == 200, reply.text
    error = reply.json()["error"]
    assert (error["code"], reply.json()["id"]) == (-32600, "deep-1")
    assert str(MAX_JSON_DEPTH) in error["data"]["detail"]
    listed = await post(http, request("tasks.list", {"limit": 1000}))
    assert name not in {task["name"] for task in listed.json()["result"]["tasks"]}


async def test_deep_a2a_data_is_an_invalid_request_not_a_500(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str]
) -> None:
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "deep-a2a",
        "parts": [{"kind": "data", "data": {"d": "__DEEP__"}}],
    }
    body = request("message/send", {"message": message}, "a2a-deep")
    content = json.dumps(body).replace('"__DEEP__"', nested(250)).encode()
    reply = await http.post("/", content=content, headers=JSON)
    assert reply.status_code == 200, reply.text
    assert reply.json()["error"]["code"] == -32600
    await still_serving(http, stack)


# --- integers beyond 64 bits --------------------------------------------------------


async def test_a_tool_returning_10_to_the_100_completes_with_its_output_visible(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    spec = calculator_graph(f"bigint-{unique}", "10**100")
    run = await start(http, graph_spec=spec, input=None)
    # Closed in Temporal: what GET /runs/{id} shows now comes from the archive.
    done = await wait_for_status(
        http, run["workflow_id"], {"COMPLETED", "FAILED"}, field="temporal_status"
    )
    assert done["status"] == "completed", done
    # BSON has no integer that big: the archive keeps it as its decimal string.
    assert done["output"] == str(10**100)
    reports = {r["node_id"]: r["status"] for r in done["node_reports"]}
    assert reports == {"calc": "SUCCESS", "out": "SUCCESS"}


# --- prompt answers -----------------------------------------------------------------


def prompt_graph(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "entry": "ask",
        "nodes": [
            {
                "id": "ask",
                "type": "prompt",
                "params": {
                    "prompt": "Ship it?",
                    "ui_schema": {
                        "type": "object",
                        "properties": {"decision": {"type": "string"}},
                        "required": ["decision"],
                    },
                },
            },
            {"id": "out", "type": "output"},
        ],
        "edges": [{"from": "ask", "to": "out"}],
    }


async def test_extra_or_oversized_answers_are_refused_and_the_prompt_waits(
    http: httpx.AsyncClient, examples: list[str], unique: str
) -> None:
    run = await start(http, graph_spec=prompt_graph(f"answers-{unique}"), input=None)
    await wait_for_status(http, run["workflow_id"], {"paused"})

    extra = problem(await answer(http, run, {"data": {"decision": "yes", "note": "hi"}}), 422)
    assert [(e["field"], e["rule"]) for e in extra["errors"]] == [("note", "additionalProperties")]
    huge = {"data": {"decision": "yes", "padding": "x" * 900_000}}
    body = problem(await answer(http, run, huge), 422)
    assert [(e["field"], e["rule"]) for e in body["errors"]] == [("data", "max_bytes")]
    assert "SPINDLE_MAX_ANSWER_BYTES" in body["detail"]

    waiting = await wait_for_status(http, run["workflow_id"], {"paused"})
    assert waiting["pending_input"]["node_id"] == "ask"
    accepted = await answer(http, run, {"data": {"decision": "yes"}})
    assert accepted.status_code == 200, accepted.text
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["output"] == {"decision": "yes"}
