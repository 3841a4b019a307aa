"""Bad input never crashes the gateway or leaves anything half-written.

Every malformed, mistyped, oversized, too deep or wrongly labelled request is
answered with a problem+json naming what is wrong (400/404/413/415/422), a
refused run start starts no workflow and archives no run, a refused answer
leaves the prompt waiting, and afterwards the gateway still serves a normal run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from spindle.gateway.http.body_limit import MAX_JSON_DEPTH
from tests.e2e.conftest import SpindleStack, example_graph
from tests.e2e.run_driver import T, answer, start, updates, wait_for_status

pytestmark = pytest.mark.e2e

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


def problem(reply: httpx.Response, status: int) -> dict[str, Any]:
    """The problem body of ``reply``, which must have ``status``."""
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith(PROBLEM), reply.headers
    body: dict[str, Any] = reply.json()
    assert body["status"] == status
    assert body["title"] and body["detail"]
    return body


def rules(body: dict[str, Any]) -> set[str]:
    return {e["rule"] for e in body.get("errors", [])}


def pipeline(name: str) -> dict[str, Any]:
    """The example pipeline under a name no other test uses."""
    return {**example_graph("pipeline"), "name": name}


async def assert_nothing_started(http: httpx.AsyncClient, stack: SpindleStack, name: str) -> None:
    """No run of graph ``name`` in the archive, none in Temporal's visibility."""
    listed = await http.get("/runs", params={"graph": name})
    assert listed.status_code == 200, listed.text
    assert listed.json()["total"] == 0
    count = await stack.temporal.count_workflows(f"SpindleGraph = '{name}'")
    assert count.count == 0


async def assert_still_serving(http: httpx.AsyncClient, stack: SpindleStack, text: str) -> None:
    """The gateway process is alive, healthy, and runs a graph to completion."""
    assert stack.gateway.alive(), stack.gateway.log_tail()
    assert (await http.get("/healthz")).status_code == 200
    run = await start(http, graph="pipeline", input={"text": text})
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["input"] == {"text": text}


def nested(depth: int) -> str:
    """``depth`` arrays, one inside the other, as JSON text."""
    return "[" * depth + "]" * depth


# --- malformed and non-standard JSON ------------------------------------------------


@pytest.mark.parametrize(
    ("label", "template", "says"),
    [
        ("truncated", b'{"graph_spec": %s, "input": {"text": "x"', "not valid JSON"),
        ("trailing garbage", b'{"graph_spec": %s, "input": {"text": "x"}} extra', "not valid JSON"),
        ("single quotes", b"{'graph_spec': %s}", "not valid JSON"),
        ("trailing comma", b'{"graph_spec": %s, "input": {"text": "x"},}', "not valid JSON"),
        ("NaN", b'{"graph_spec": %s, "input": {"text": "x", "n": NaN}}', "not valid JSON"),
        (
            "Infinity",
            b'{"graph_spec": %s, "input": {"text": "x", "n": -Infinity}}',
            "not valid JSON",
        ),
        (
            "overflowing double",
            b'{"graph_spec": %s, "input": {"text": "x", "n": 1e999}}',
            "infinity",
        ),
        ("lone surrogate", b'{"graph_spec": %s, "input": {"text": "\\ud800"}}', "surrogate"),
        ("invalid UTF-8", b'{"graph_spec": %s, "input": {"text": "\xff\xfe"}}', "UTF-8"),
        ("UTF-16", None, "UTF-8"),
        ("5000-digit number", b'{"graph_spec": %s, "input": {"n": ' + b"9" * 5000 + b"}}", "JSON"),
    ],
)
async def test_malformed_json_is_a_400_naming_the_problem(
    http: httpx.AsyncClient,
    stack: SpindleStack,
    examples: list[str],
    unique: str,
    label: str,
    template: bytes | None,
    says: str,
) -> None:
    name = f"malformed-{unique}"
    spec = json.dumps(pipeline(name)).encode()
    if template is None:
        content = json.dumps({"graph_spec": pipeline(name), "input": {"text": "x"}}).encode(
            "utf-16"
        )
    else:
        content = template % spec
    body = problem(await http.post("/runs", content=content, headers=JSON), 400)
    assert says.lower() in body["detail"].lower(), (label, body)
    assert rules(body) & {"json_invalid", "utf8"}, body
    await assert_nothing_started(http, stack, name)


async def test_a_json_error_names_its_position(http: httpx.AsyncClient) -> None:
    content = b'{"graph": "pipeline",\n "input": {"text": "x",}}'
    body = problem(await http.post("/runs", content=content, headers=JSON), 400)
    assert "not valid JSON" in body["detail"]
    assert "position" in body["detail"] or "line 2" in body["detail"], body


# --- wrong types, unknown fields, huge strings --------------------------------------


@pytest.mark.parametrize(
    ("payload", "field", "rule"),
    [
        ({"graph": 12}, "graph", "string_type"),
        ({"graph_spec": "pipeline"}, "graph_spec", "dict_type"),
        ({"graph": "pipeline", "context": []}, "context", "dict_type"),
        ({"graph": "pipeline", "meta": "m"}, "meta", "dict_type"),
        ({"graph": "pipeline", "surprise": 1}, "surprise", "extra_forbidden"),
        ({"graph": "g" * 10_000}, "graph", "string_too_long"),
        ([{"graph": "pipeline"}], "body", "model_attributes_type"),
        ("pipeline", "body", "model_attributes_type"),
    ],
)
async def test_wrong_shapes_are_a_422_naming_the_field(
    http: httpx.AsyncClient, payload: Any, field: str, rule: str
) -> None:
    body = problem(await http.post("/runs", json=payload), 422)
    assert (field, rule) in {(e["field"], e["rule"]) for e in body["errors"]}, body
    assert field in body["detail"]


async def test_unknown_fields_of_a_graph_spec_name_the_node(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    name = f"extra-{unique}"
    spec = pipeline(name)
    spec["nodes"] = [{**spec["nodes"][0], "colour": "red"}, *spec["nodes"][1:]]
    body = problem(await http.post("/runs", json={"graph_spec": spec, "input": {"text": "x"}}), 422)
    [error] = body["errors"]
    assert error["node"] == "keywords" and error["rule"] == "extra_forbidden"
    assert error["field"] == "nodes.0.colour"
    await assert_nothing_started(http, stack, name)
    problem(await http.put(f"/graphs/{name}", json={**pipeline(name), "owner": "me"}), 422)
    problem(await http.get(f"/graphs/{name}"), 404)  # nothing registered


async def test_a_huge_header_value_is_a_422_naming_the_header(http: httpx.AsyncClient) -> None:
    reply = await http.post(
        "/runs",
        json={"graph": "pipeline", "input": {"text": "x"}},
        headers={"Idempotency-Key": "k" * 500},
    )
    body = problem(reply, 422)
    assert body["errors"][0]["in"] == "header"
    assert body["errors"][0]["field"] == "Idempotency-Key"


# --- nesting and numbers ------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH - 1, 1_000, 100_000])
async def test_deep_nesting_is_a_400_and_starts_nothing(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str, depth: int
) -> None:
    name = f"deep-{unique}"
    # {"graph_spec": …, "input": {"text": …, "d": <depth arrays>}} nests depth + 2 levels.
    content = (
        f'{{"graph_spec": {json.dumps(pipeline(name))}, '
        f'"input": {{"text": "x", "d": {nested(depth)}}}}}'
    ).encode()
    body = problem(await http.post("/runs", content=content, headers=JSON), 400)
    assert "max_depth" in rules(body)
    assert str(MAX_JSON_DEPTH) in body["detail"]
    await assert_nothing_started(http, stack, name)
    await assert_still_serving(http, stack, f"after {depth} levels")


async def test_nesting_up_to_the_limit_runs_and_keeps_the_input(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    deepest = json.loads(nested(MAX_JSON_DEPTH - 2))
    run = await start(http, graph="pipeline", input={"text": "deep", "d": deepest})
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["input"] == {"text": "deep", "d": deepest}


async def test_deep_nesting_in_a_graph_registration_is_refused(
    http: httpx.AsyncClient, unique: str
) -> None:
    name = f"deep-graph-{unique}"
    spec = pipeline(name)
    content = json.dumps(spec).replace(
        '"tool": "extract_keywords"', f'"tool": "extract_keywords", "x": {nested(900)}'
    )
    body = problem(await http.put(f"/graphs/{name}", content=content.encode(), headers=JSON), 400)
    assert "max_depth" in rules(body)
    problem(await http.get(f"/graphs/{name}"), 404)


@pytest.mark.parametrize("number", ["9223372036854775808", "-9223372036854775809", "1" * 40])
async def test_integers_beyond_64_bits_are_a_422(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str, number: str
) -> None:
    name = f"bigint-{unique}"
    content = (
        f'{{"graph_spec": {json.dumps(pipeline(name))}, "input": {{"text": "x", "n": {number}}}}}'
    )
    body = problem(await http.post("/runs", content=content.encode(), headers=JSON), 422)
    assert "int64_range" in rules(body)
    assert number[:20] in body["detail"]
    await assert_nothing_started(http, stack, name)


async def test_64_bit_integers_and_digits_in_strings_are_kept_exactly(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    sent = {"text": "x", "max": 2**63 - 1, "min": -(2**63), "id": "1" * 40, "f": 1.5e300}
    run = await start(http, graph="pipeline", input=sent)
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["input"] == sent


# --- NUL bytes and invalid UTF-8 outside the body ------------------------------------


async def test_nul_characters_in_json_strings_are_data_and_survive(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    sent = {"text": "before\x00after", "note": ["\x00", {"k": "v\x00"}]}
    run = await start(http, graph="pipeline", input=sent)
    done = await wait_for_status(http, run["workflow_id"], {"completed"})
    assert done["input"] == sent


async def test_a_nul_character_in_an_object_key_is_a_422(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    """MongoDB cannot store such a key: the run would lose its archive document."""
    name = f"nul-key-{unique}"
    payload = {"graph_spec": pipeline(name), "input": {"text": "x", "rows": [{"k\x00ey": 1}]}}
    body = problem(await http.post("/runs", json=payload), 422)
    assert [(e["field"], e["rule"]) for e in body["errors"]] == [
        ("input.rows[0].k\\u0000ey", "nul_in_key")
    ]
    await assert_nothing_started(http, stack, name)


@pytest.mark.parametrize(
    "path",
    [
        "/runs/a%00b",
        "/runs/%FF%FE",
        "/runs/%FF/%FE/updates",
        "/runs/%C0%AF/x/stream",
        "/api/v1/workflows/runs/%ED%A0%80/x/updates",
        "/runs/" + "w" * 5_000,
        "/graphs/%FF%00",
    ],
)
async def test_bad_path_parameters_are_a_404(http: httpx.AsyncClient, path: str) -> None:
    body = problem(await http.get(path), 404)
    assert "not" in body["detail"]


async def test_a_bad_graph_name_in_the_path_names_the_rule(http: httpx.AsyncClient) -> None:
    spec = {"entry": "a", "nodes": [{"id": "a", "type": "output"}]}
    for bad in ("a%00b", "%FF%FE", "with%20space"):
        body = problem(await http.put(f"/graphs/{bad}", json=spec), 422)
        assert body["errors"][0]["field"] == "name"
        assert body["errors"][0]["rule"] == "string_pattern_mismatch"


async def test_raw_invalid_utf8_in_the_request_line_is_refused(
    http: httpx.AsyncClient, stack: SpindleStack
) -> None:
    """Bytes no client should send unescaped: the server refuses them and lives on."""
    address = urlsplit(stack.base_url)
    assert address.hostname is not None and address.port is not None
    auth = http.headers["Authorization"]
    for target in (b"/runs/\xff\xfe", b"/runs?graph=\xc0\xaf", b"/runs/a\x00b"):
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        try:
            writer.write(
                b"GET " + target + b" HTTP/1.1\r\nHost: gateway\r\n"
                b"Authorization: " + auth.encode() + b"\r\nConnection: close\r\n\r\n"
            )
            await writer.drain()
            status_line = await asyncio.wait_for(reader.readline(), 10)
        finally:
            writer.close()
        status = int(status_line.split()[1])
        assert status in (400, 404), (target, status_line)
    assert (await http.get("/healthz")).status_code == 200


# --- query parameters ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=abc", "limit"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=99999999999999999999999", "limit"),
        ("offset=-1", "offset"),
        ("offset=1.5", "offset"),
        ("offset=99999999999999999999", "offset"),
        ("status=sleeping", "status"),
        ("status=%FF%FE", "status"),
        ("graph=" + "g" * 500, "graph"),
    ],
)
async def test_bad_query_parameters_are_a_422_naming_the_parameter(
    http: httpx.AsyncClient, query: str, field: str
) -> None:
    body = problem(await http.get(f"/runs?{query}"), 422)
    assert {"in": "query", "field": field}.items() <= body["errors"][0].items(), body


async def test_bad_query_parameters_of_a_run_route_name_the_parameter(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="pipeline", input={"text": "query checks"})
    base = f"/runs/{run['workflow_id']}/{run['run_id']}"
    for path, params, field in [
        ("updates", {"since": "yesterday"}, "since"),
        ("updates", {"since": "-5"}, "since"),
        ("stream", {"since": "-1"}, "since"),
        ("stream", {"skipHistory": "perhaps"}, "skipHistory"),
    ]:
        body = problem(await http.get(f"{base}/{path}", params=params), 422)
        assert {"in": "query", "field": field}.items() <= body["errors"][0].items(), body
    for headers, params, name in [
        ({"Last-Event-ID": "abc"}, {}, "Last-Event-ID"),
        ({}, {"lastEventId": "-3"}, "lastEventId"),
    ]:
        reply = await http.get(f"{base}/stream", headers=headers, params=params)
        assert reply.status_code in (400, 422), reply.text
        body = problem(reply, reply.status_code)
        assert name in body["detail"]


async def test_invalid_utf8_in_a_query_value_is_not_an_error_of_the_server(
    http: httpx.AsyncClient,
) -> None:
    reply = await http.get("/runs?graph=%FF%FE%00")
    assert reply.status_code == 200, reply.text
    assert reply.json()["total"] == 0


# --- content types ------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/xml", None],
)
async def test_a_body_that_is_not_sent_as_json_is_a_415(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str, content_type: str | None
) -> None:
    name = f"ctype-{unique}"
    content = json.dumps({"graph_spec": pipeline(name), "input": {"text": "x"}}).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    reply = await http.post("/runs", content=content, headers=headers)
    assert reply.request.headers.get("Content-Type") == content_type
    body = problem(reply, 415)
    assert "application/json" in body["detail"]
    assert body["errors"][0]["field"] == "Content-Type"
    await assert_nothing_started(http, stack, name)


@pytest.mark.parametrize(
    "content_type",
    ["application/json; charset=utf-8", "APPLICATION/JSON", "application/vnd.x+json"],
)
async def test_json_under_any_json_media_type_is_accepted(
    http: httpx.AsyncClient, examples: list[str], content_type: str
) -> None:
    content = json.dumps({"graph": "pipeline", "input": {"text": content_type}}).encode()
    reply = await http.post("/runs", content=content, headers={"Content-Type": content_type})
    assert reply.status_code == 201, reply.text


# --- oversized bodies ---------------------------------------------------------------


def padded_start(name: str, size: int) -> bytes:
    """A valid start-run body of exactly ``size`` bytes (padding in the input text)."""
    head = f'{{"graph_spec": {json.dumps(pipeline(name))}, "input": {{"text": "'.encode()
    tail = b'"}}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


async def test_a_body_at_the_limit_runs_and_one_byte_more_is_a_413(
    http: httpx.AsyncClient, stack: SpindleStack, unique: str
) -> None:
    limit = stack.settings.max_body_bytes
    over = f"over-{unique}"
    body = problem(
        await http.post("/runs", content=padded_start(over, limit + 1), headers=JSON), 413
    )
    assert str(limit) in body["detail"]
    await assert_nothing_started(http, stack, over)

    at = f"at-{unique}"
    reply = await http.post("/runs", content=padded_start(at, limit), headers=JSON)
    assert reply.status_code == 201, reply.text
    done = await wait_for_status(http, reply.json()["workflow_id"], {"completed"})
    assert len(done["input"]["text"]) > limit // 2


async def test_a_chunked_body_over_the_limit_is_a_413_and_starts_nothing(
    http: httpx.AsyncClient, stack: SpindleStack, examples: list[str], unique: str
) -> None:
    limit = stack.settings.max_body_bytes
    name = f"chunked-{unique}"
    content = padded_start(name, limit * 3)

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as read
        for start_at in range(0, len(content), 65_536):
            yield content[start_at : start_at + 65_536]

    reply = await http.post("/runs", content=chunks(), headers=JSON)
    assert "content-length" not in reply.request.headers
    body = problem(reply, 413)
    assert str(limit) in body["detail"]
    await assert_nothing_started(http, stack, name)
    await assert_still_serving(http, stack, "after a chunked flood")


# --- answers to a waiting prompt ----------------------------------------------------


async def test_refused_answers_leave_the_prompt_waiting(
    http: httpx.AsyncClient, examples: list[str]
) -> None:
    run = await start(http, graph="approval-flow", input={"topic": "bad answers"})
    await wait_for_status(http, run["workflow_id"], {"paused"})
    path = f"/runs/{run['workflow_id']}/{run['run_id']}/signal/UserInput"
    refusals = [
        (await http.post(path, json={"message": 12}), 422),
        (await http.post(path, json={"data": "approve"}), 422),
        (await http.post(path, json=["approve"]), 422),
        (await http.post(path, content=b'{"message": NaN}', headers=JSON), 400),
        (await http.post(path, content=b'{"message": "approve"', headers=JSON), 400),
        (await http.post(path, content=b"approve", headers={"Content-Type": "text/plain"}), 415),
        (
            await http.post(
                path, content=f'{{"data": {nested(MAX_JSON_DEPTH + 5)}}}'.encode(), headers=JSON
            ),
            400,
        ),
    ]
    for reply, status in refusals:
        problem(reply, status)
    waiting = await wait_for_status(http, run["workflow_id"], {"paused"})
    assert waiting["pending_input"]["node_id"] == "review"
    assert not [m for m in await updates(http, run) if m["t"] == T.QUESTION]

    accepted = await answer(
        http, run, {"data": {"decision": "approve"}, "client_message_id": "ok-1"}
    )
    assert accepted.status_code == 200, accepted.text
    await wait_for_status(http, run["workflow_id"], {"completed"})
