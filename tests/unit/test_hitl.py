"""HITL answers: what a prompt accepts and how a bad answer is explained."""

from __future__ import annotations

from typing import Any

import pytest

from spindle.shared.contracts.errors import InputInvalid
from spindle.shared.contracts.runs import PendingInput, UserInput
from spindle.shared.graphs.node_params import default_ui_schema
from spindle.worker.contracts.prompt_answers import (
    json_path,
    resolve_answer,
    single_required_string,
)

pytestmark = pytest.mark.unit

APPROVAL_SCHEMA: dict[str, Any] = {
    "title": "Approve the draft?",
    "type": "object",
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject"]},
        "comment": {"type": "string", "maxLength": 20},
    },
    "required": ["decision"],
    "additionalProperties": False,
}


def pending(schema: dict[str, Any], node_id: str = "review") -> PendingInput:
    return PendingInput(
        node_id=node_id, prompt="Approve?", ui_schema=schema, requested_at="2025-01-01T00:00:00Z"
    )


def rejection(schema: dict[str, Any], user_input: UserInput) -> InputInvalid:
    with pytest.raises(InputInvalid) as info:
        resolve_answer(pending(schema), user_input)
    return info.value


def test_matching_object_is_the_answer() -> None:
    answer = resolve_answer(
        pending(APPROVAL_SCHEMA), UserInput(data={"decision": "approve", "comment": "ok"})
    )
    assert answer == {"decision": "approve", "comment": "ok"}


def test_plain_message_fills_the_single_required_string() -> None:
    schema = default_ui_schema("ask", "What is your name?")
    answer = resolve_answer(pending(schema, "ask"), UserInput(message="Ada"))
    assert answer == {"ask_response": "Ada"}


def test_plain_message_fills_a_required_enum_and_is_checked_against_it() -> None:
    assert resolve_answer(pending(APPROVAL_SCHEMA), UserInput(message="reject")) == {
        "decision": "reject"
    }
    error = rejection(APPROVAL_SCHEMA, UserInput(message="maybe"))
    assert error.errors == [
        {
            "field": "decision",
            "rule": "enum",
            "message": "'maybe' is not one of ['approve', 'reject']",
        }
    ]


def test_message_completes_data_missing_the_required_string() -> None:
    answer = resolve_answer(
        pending(APPROVAL_SCHEMA), UserInput(message="approve", data={"comment": "fine"})
    )
    assert answer == {"decision": "approve", "comment": "fine"}


def test_enum_violation_names_field_and_rule() -> None:
    error = rejection(APPROVAL_SCHEMA, UserInput(data={"decision": "perhaps"}))
    assert [(e["field"], e["rule"]) for e in error.errors] == [("decision", "enum")]
    assert "decision" in error.detail
    assert "prompt 'review'" in error.detail
    assert error.status == 422


def test_wrong_type_names_field_and_rule() -> None:
    error = rejection(APPROVAL_SCHEMA, UserInput(data={"decision": 3}))
    rules = {(e["field"], e["rule"]) for e in error.errors}
    assert ("decision", "type") in rules


def test_missing_required_field_names_the_missing_field() -> None:
    error = rejection(APPROVAL_SCHEMA, UserInput(data={"comment": "no decision"}))
    assert error.errors == [
        {"field": "decision", "rule": "required", "message": "'decision' is a required property"}
    ]


def test_message_cannot_fill_a_schema_with_several_required_fields() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }
    error = rejection(schema, UserInput(message="hello"))
    assert sorted(e["field"] for e in error.errors) == ["a", "b"]
    assert {e["rule"] for e in error.errors} == {"required"}


def test_several_problems_are_all_reported() -> None:
    error = rejection(
        APPROVAL_SCHEMA,
        UserInput(data={"decision": "nah", "comment": "x" * 30, "extra": 1}),
    )
    assert {(e["field"], e["rule"]) for e in error.errors} == {
        ("decision", "enum"),
        ("comment", "maxLength"),
        ("$", "additionalProperties"),
    }


def test_nested_paths_use_json_path_notation() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"qty": {"type": "integer", "minimum": 1}},
                },
            }
        },
    }
    error = rejection(schema, UserInput(data={"items": [{"qty": 2}, {"qty": 0}]}))
    assert error.errors[0]["field"] == "items[1].qty"
    assert error.errors[0]["rule"] == "minimum"


def test_empty_answer_is_rejected() -> None:
    error = rejection(APPROVAL_SCHEMA, UserInput())
    assert error.errors[0]["rule"] == "required"
    assert "empty answer" in error.detail


@pytest.mark.parametrize(
    "user_input",
    [UserInput(message=""), UserInput(data={"name": ""}), UserInput(data={"name": " \n"})],
)
def test_a_blank_required_text_is_refused_naming_the_field(user_input: UserInput) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "note": {"type": "string"}},
        "required": ["name"],
    }
    error = rejection(schema, user_input)
    assert [(e["field"], e["rule"]) for e in error.errors] == [("name", "required")]
    # An optional text may be blank; a schema that offers "" takes it; old runs replay.
    assert resolve_answer(pending(schema), UserInput(data={"name": "x", "note": ""}))
    offered = {**schema, "properties": {"name": {"type": "string", "enum": ["", "a"]}}}
    assert resolve_answer(pending(offered), UserInput(data={"name": ""})) == {"name": ""}
    assert resolve_answer(pending(schema), user_input, blank_required=True)


def test_bad_ui_schema_is_reported_not_raised_as_crash() -> None:
    error = rejection({"type": "no-such-type"}, UserInput(data={}))
    assert error.errors[0]["rule"] == "schema"


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (default_ui_schema("n", "?"), "n_response"),
        (APPROVAL_SCHEMA, "decision"),
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, None),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, None),
    ],
)
def test_single_required_string(schema: dict[str, Any], expected: str | None) -> None:
    assert single_required_string(schema) == expected


def test_json_path() -> None:
    assert json_path([]) == "$"
    assert json_path(["a", 0, "b"]) == "a[0].b"


OPEN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"decision": {"type": "string"}},
    "required": ["decision"],
}


def test_fields_the_schema_does_not_name_are_refused_each_by_name() -> None:
    # JSON Schema would let them through: 900 KB of "padding" reached the run.
    error = rejection(
        OPEN_SCHEMA, UserInput(data={"decision": "yes", "padding": "x" * 900_000, "b": 1})
    )
    assert [(e["field"], e["rule"]) for e in error.errors] == [
        ("b", "additionalProperties"),
        ("padding", "additionalProperties"),
    ]
    assert "'padding' is not a field of this prompt (fields: decision)" in error.detail
    assert "x" * 100 not in error.detail


def test_the_default_prompt_schema_takes_only_its_response_field() -> None:
    schema = default_ui_schema("ask", "Name?")
    error = rejection(schema, UserInput(message="Ada", data={"extra": True}))
    assert [e["field"] for e in error.errors] == ["extra"]


@pytest.mark.parametrize(
    "allows",
    [
        {"additionalProperties": True},
        {"additionalProperties": {"type": "integer"}},
        {"patternProperties": {"^x_": {}}},
    ],
)
def test_a_schema_that_allows_more_fields_gets_them(allows: dict[str, Any]) -> None:
    answer = resolve_answer(
        pending({**OPEN_SCHEMA, **allows}), UserInput(data={"decision": "y", "x_n": 1})
    )
    assert answer == {"decision": "y", "x_n": 1}


def test_a_message_that_is_a_json_object_answers_a_multi_field_form() -> None:
    message = '{"decision": "approve", "comment": "ship it"}'
    answer = resolve_answer(pending(APPROVAL_SCHEMA), UserInput(message=message))
    assert answer == {"decision": "approve", "comment": "ship it"}
    error = rejection(APPROVAL_SCHEMA, UserInput(message='{"decision": "maybe"}'))
    assert [(e["field"], e["rule"]) for e in error.errors] == [("decision", "enum")]


def test_a_message_that_only_looks_like_json_stays_text() -> None:
    schema = default_ui_schema("ask", "Paste the config")
    for text in ('{"not_a_field": 1}', "{broken", "{}"):
        assert resolve_answer(pending(schema, "ask"), UserInput(message=text)) == {
            "ask_response": text
        }
