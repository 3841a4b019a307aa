"""JSON-RPC 2.0 envelope parsing and error objects (spindle.gateway.protocols.jsonrpc.protocol)."""

from __future__ import annotations

import orjson
import pytest

from spindle.gateway.protocols.jsonrpc.protocol import (
    Call,
    Rejected,
    error_from_exception,
    parse_body,
    parse_member,
)
from spindle.gateway.protocols.jsonrpc.task_rules import find_cycle
from spindle.shared.contracts.errors import CircularDependency, NotFound, ValidationFailed


def test_unparsable_body_is_a_parse_error_with_null_id() -> None:
    parsed = parse_body(b'{"jsonrpc": "2.0", "method": "tasks.get", "id": 1')
    assert parsed.error == {
        "jsonrpc": "2.0",
        "error": {"code": -32700, "message": "Parse error"},
        "id": None,
    }


def test_empty_batch_and_scalars_are_invalid_requests() -> None:
    for body in (b"[]", b"42", b'"tasks.get"', b"null"):
        parsed = parse_body(body)
        assert parsed.error is not None, body
        assert parsed.error["error"]["code"] == -32600
        assert parsed.error["id"] is None


@pytest.mark.parametrize("request_id", ["abc", 7, 0, -3, 2.5, None, ""])
def test_ids_of_every_json_rpc_type_are_kept(request_id: object) -> None:
    call = parse_member({"jsonrpc": "2.0", "method": "m", "params": {}, "id": request_id})
    assert isinstance(call, Call)
    assert call.id == request_id
    assert not call.is_notification


def test_a_request_without_id_is_a_notification() -> None:
    call = parse_member({"jsonrpc": "2.0", "method": "m"})
    assert isinstance(call, Call)
    assert call.is_notification
    assert call.params == {}


def test_positional_params_are_kept_apart_from_named_ones() -> None:
    call = parse_member({"jsonrpc": "2.0", "method": "m", "params": [1, 2], "id": 1})
    assert isinstance(call, Call)
    assert call.params is None


@pytest.mark.parametrize(
    ("member", "echoed"),
    [
        ({"jsonrpc": "1.0", "method": "m", "id": 1}, 1),
        ({"method": "m", "id": "x"}, "x"),
        ({"jsonrpc": "2.0", "method": 5, "id": 2}, 2),
        ({"jsonrpc": "2.0", "method": "", "id": 2}, 2),
        ({"jsonrpc": "2.0", "method": "m", "params": "p", "id": 3}, 3),
        ({"jsonrpc": "2.0", "method": "m", "params": None, "id": 3}, 3),
        ({"jsonrpc": "2.0", "method": "m", "id": {"a": 1}}, None),
        ({"jsonrpc": "2.0", "method": "m", "id": True}, None),
        ({"jsonrpc": "2.0", "method": "m", "id": [1]}, None),
        (1, None),
        ("x", None),
    ],
)
def test_invalid_members_are_rejected_with_their_id_when_it_is_valid(
    member: object, echoed: object
) -> None:
    rejected = parse_member(member)
    assert isinstance(rejected, Rejected)
    assert rejected.response["error"]["code"] == -32600
    assert rejected.response["id"] == echoed
    assert rejected.response["error"]["data"]["reason"]


def test_batch_members_are_parsed_one_by_one() -> None:
    body = orjson.dumps(
        [
            {"jsonrpc": "2.0", "method": "a", "id": 1},
            1,
            {"jsonrpc": "2.0", "method": "b"},
        ]
    )
    parsed = parse_body(body)
    assert parsed.batch and parsed.error is None
    kinds = [type(member).__name__ for member in parsed.members]
    assert kinds == ["Call", "Rejected", "Call"]


def test_validation_errors_name_field_and_reason() -> None:
    exc = ValidationFailed(
        "bad", errors=[{"field": "priority", "reason": "too big"}, {"field": "name", "reason": "x"}]
    )
    error = error_from_exception("r1", exc)["error"]
    assert error["code"] == -32602
    assert error["message"] == "Invalid params"
    assert error["data"]["field"] == "priority"
    assert error["data"]["reason"] == "too big"
    assert len(error["data"]["errors"]) == 2


def test_seed_003_codes_carry_seed_003_messages() -> None:
    assert error_from_exception(1, NotFound("task x not found"))["error"]["message"] == (
        "Task not found"
    )
    cycle = error_from_exception(1, CircularDependency("a -> b -> a"))["error"]
    assert (cycle["code"], cycle["message"]) == (-32002, "Circular dependency detected")


def test_find_cycle() -> None:
    assert find_cycle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": ["a"]}) == ["a", "a"]
    chain = {str(i): [str(i + 1)] for i in range(5000)}
    assert find_cycle(chain) is None
    chain["5000"] = ["0"]
    cycle = find_cycle(chain)
    assert cycle is not None and cycle[0] == cycle[-1]
