"""The error tree: each class goes to Temporal and back, and is documented."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.exceptions import ActivityError, ApplicationError, RetryState

from spindle.shared.contracts import errors
from spindle.shared.contracts.errors import (
    ErrorDetail,
    InputInvalid,
    InvalidParams,
    InvalidSteer,
    NotWaiting,
    SpindleError,
    Unavailable,
    UnknownWorkstream,
    WorkstreamStartFailed,
    from_application_error,
    spindle_error_classes,
    to_application_error,
)
from spindle.worker.contracts.policies import NON_RETRYABLE_ERRORS

pytestmark = pytest.mark.unit

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "api" / "errors.md"
CLASSES = spindle_error_classes()


def _sample(cls: type[SpindleError]) -> SpindleError:
    return cls(
        f"a {cls.__name__}",
        errors=[{"field": "x", "rule": "r", "message": "bad x"}],
        context={"node": "n1"},
    )


def test_the_tree_is_every_error_class_of_the_module() -> None:
    declared = {
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, SpindleError)
    }
    assert set(CLASSES) == declared


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_every_class_goes_to_temporal_and_back(cls: type[SpindleError]) -> None:
    error = _sample(cls)
    failure = to_application_error(error)
    assert failure.type == cls.application_type == cls.__name__
    assert failure.non_retryable is cls.non_retryable

    back = from_application_error(failure)
    assert type(back) is cls
    assert back is not None
    assert (back.detail, back.errors, back.context) == (error.detail, error.errors, error.context)
    assert back.problem() == error.problem()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_the_error_is_found_through_temporal_wrappers(cls: type[SpindleError]) -> None:
    failure = to_application_error(_sample(cls))
    activity = ActivityError(
        "activity failed",
        scheduled_event_id=1,
        started_event_id=2,
        identity="worker",
        activity_type="execute_node",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    activity.__cause__ = failure
    update = WorkflowUpdateFailedError(activity)
    assert type(from_application_error(update)) is cls


def test_a_failure_of_another_type_is_no_spindle_error() -> None:
    assert from_application_error(ApplicationError("boom", type="RuntimeError")) is None
    assert from_application_error(RuntimeError("boom")) is None
    assert from_application_error(None) is None


@pytest.mark.parametrize(
    ("error", "details"),
    [
        # The details payloads recorded histories carry.
        (InputInvalid("bad", errors=[]), [{"errors": []}]),
        (InvalidParams("bad"), [{"errors": []}]),
        (NotWaiting("not waiting"), []),
        (NotWaiting("not on n", context={"waiting_on": ["a"]}), [{"waiting_on": ["a"]}]),
        (
            UnknownWorkstream("unknown", context={"launch_id": "ws-9", "known": []}),
            [{"launch_id": "ws-9", "known": []}],
        ),
    ],
)
def test_details_keep_their_recorded_shape(error: SpindleError, details: list[Any]) -> None:
    assert list(to_application_error(error).details) == details


def test_retry_hints_survive_the_round_trip() -> None:
    started = from_application_error(to_application_error(WorkstreamStartFailed("no child")))
    assert isinstance(started, Unavailable)
    assert started.retry_after == 2
    assert Unavailable("down").retry_after == 5


def test_an_invalid_steer_names_the_command_field() -> None:
    assert InvalidSteer("no such command").problem()["errors"] == [
        {"field": "command", "rule": "invalid_steer", "message": "no such command"}
    ]


@pytest.mark.parametrize(
    "shape",
    [
        {"in": "query", "field": "limit", "rule": "int_parsing", "message": "limit: bad"},
        {"node": "n1", "field": "params.x", "rule": "required", "message": "n1: x missing"},
        {"field": "dependencies", "reason": "circular dependency"},
        {"in": "body", "field": "body", "rule": "utf8", "position": 3},
        {"graph": "g", "node": "n", "field": "f", "rule": "r", "message": "m"},
    ],
)
def test_error_details_keep_each_wire_shape(shape: dict[str, Any]) -> None:
    assert ErrorDetail.model_validate(shape).wire() == shape
    assert SpindleError("x", errors=[shape]).problem()["errors"] == [shape]


def test_policies_list_the_non_retryable_classes() -> None:
    assert {"InvalidParams", "InputInvalid", "ExecutorNotFound"} <= set(NON_RETRYABLE_ERRORS)


def test_the_docs_page_lists_every_class() -> None:
    page = DOCS_PAGE.read_text(encoding="utf-8")
    assert page.startswith("# Errors\n")
    for cls in CLASSES:
        row = re.search(rf"^\| `{cls.__name__}` \|(.+)$", page, re.MULTILINE)
        assert row is not None, f"{cls.__name__} is not in {DOCS_PAGE.name}"
        cells = [cell.strip() for cell in row.group(1).split("|")]
        assert cells[:4] == [
            str(cls.status),
            cls.title,
            str(cls.jsonrpc_code),
            f"`{cls.application_type}`",
        ]
        assert cls.__name__ in (errors.__doc__ or "")
