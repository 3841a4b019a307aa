"""Issue 32 points 2 and 3 through the gateway: the published ExecutionPayload schema,
and graphs whose payload schemas or shared-state keys are wrong refused at registration."""

from __future__ import annotations

import uuid

import httpx
import pytest
from jsonschema import Draft202012Validator

pytestmark = pytest.mark.e2e


def _graph(name: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "entry": "count",
        "nodes": [
            {
                "id": "count",
                "type": "tool",
                "params": {"tool": "word_count", "args": {"text": "a b"}},
            }
        ],
        **extra,
    }


async def test_the_execution_payload_schema_is_public(
    clients: dict[str, httpx.AsyncClient],
) -> None:
    response = await clients["anonymous"].get("/schemas/execution-payload")
    assert response.status_code == 200
    schema = response.json()
    Draft202012Validator.check_schema(schema)
    assert set(schema["required"]) == {"runId", "items", "meta"}
    validator = Draft202012Validator(schema)
    good = {
        "runId": "r-1",
        "items": [{"id": "1", "data": {"words": 3}}],
        "context": {},
        "meta": {"startTime": "2026-11-29T15:00:00+00:00", "lastNode": "count"},
    }
    assert not list(validator.iter_errors(good))
    bad = {**good, "meta": {"lastNode": "count"}}
    assert [e.message for e in validator.iter_errors(bad)] == ["'startTime' is a required property"]


async def test_undeclared_state_keys_and_bad_schemas_are_refused(http: httpx.AsyncClient) -> None:
    name = f"state-{uuid.uuid4().hex[:8]}"
    spec = _graph(name, state={"writable": ["count"]})
    spec["nodes"][0]["writes"] = ["count", "secret"]  # type: ignore[index]
    refused = await http.put(f"/graphs/{name}", json=spec)
    assert refused.status_code == 422
    errors = refused.json()["errors"]
    assert [(e["node"], e["field"], e["rule"]) for e in errors] == [
        ("count", "writes", "undeclared_state_key")
    ]
    assert "state key 'secret' is not declared writable" in errors[0]["message"]

    spec["nodes"][0]["writes"] = ["count"]  # type: ignore[index]
    spec["nodes"][0]["output_schema"] = {"type": "nope"}  # type: ignore[index]
    refused = await http.put(f"/graphs/{name}", json=spec)
    assert refused.status_code == 422
    assert [(e["field"], e["rule"]) for e in refused.json()["errors"]] == [
        ("output_schema", "bad_schema")
    ]

    spec["nodes"][0]["output_schema"] = {"type": "object"}  # type: ignore[index]
    assert (await http.put(f"/graphs/{name}", json=spec)).status_code == 201
    stored = (await http.get(f"/graphs/{name}")).json()
    assert stored["state"] == {"writable": ["count"]}
    assert stored["nodes"][0]["output_schema"] == {"type": "object"}
