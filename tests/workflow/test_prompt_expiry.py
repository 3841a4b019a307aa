"""Prompts that expire (after 30 days, on the time-skipping server) and prompts assigned
to named users or roles: each ``on_expiry`` action, late and duplicate answers, and the
workflow's own refusal of a non-assignee (docs/graphs/node-types.md, prompt)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.contracts.runs import EXPIRY_USER, NodeStatus, UserInput
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.store.prompts import PromptStore
from tests.workflow.runs import GraphRunner, M

pytestmark = pytest.mark.workflow

THIRTY_DAYS = 30 * 24 * 3600
APPROVAL = {
    "type": "object",
    "properties": {"decision": {"enum": ["approve", "reject"]}},
    "required": ["decision"],
}


def expiring_graph(name: str, on_expiry: Any, **prompt: Any) -> Any:
    """ask (expires in 30 days) → after (an output of what the prompt gave)."""
    graph = parse_graph(
        {
            "name": name,
            "entry": "ask",
            "nodes": [
                {
                    "id": "ask",
                    "type": "prompt",
                    "params": {
                        "prompt": "Ship it?",
                        "ui_schema": APPROVAL,
                        "expires_in_seconds": THIRTY_DAYS,
                        "on_expiry": on_expiry,
                        **prompt,
                    },
                },
                {"id": "after", "type": "output", "params": {"select": "{answer: ask}"}},
            ],
            "edges": [{"from": "ask", "to": "after"}],
        }
    )
    validate_structure(graph)
    return graph


def expiry_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if (m.get("d") or {}).get("event") == "prompt_expired"]


async def test_expiry_after_30_days_takes_the_default_answer(runner: GraphRunner) -> None:
    graph = expiring_graph("expire-answer", {"answer": {"decision": "reject"}})
    handle = await runner.start(graph)
    waiting = await runner.wait_for_prompt(handle, "ask")
    pending = waiting.pending_input
    assert pending is not None and pending.expires_at is not None
    asked = datetime.fromisoformat(pending.requested_at)
    assert datetime.fromisoformat(pending.expires_at) - asked == timedelta(days=30)

    result = await handle.result()  # the time-skipping server jumps the 30 days

    assert result.output == {"answer": {"decision": "reject"}}
    messages = await runner.messages(handle.id)
    [expired] = expiry_messages(messages)
    assert expired["t"] == M.UPDATE
    assert expired["d"]["on_expiry"] == "answer"
    assert expired["d"]["expires_at"] == pending.expires_at
    [question] = [m for m in messages if m["t"] == M.QUESTION]
    assert question["d"]["user_id"] == EXPIRY_USER
    attempts = await PromptStore(runner.archive.database).attempts_of(handle.id)
    assert [(a["user_id"], a["outcome"]) for a in attempts] == [(EXPIRY_USER, "accepted")]


async def test_expiry_after_30_days_fails_the_run(runner: GraphRunner) -> None:
    handle = await runner.start(expiring_graph("expire-fail", "fail"))
    await runner.wait_for_prompt(handle, "ask")

    with pytest.raises(WorkflowFailureError) as failed:
        await handle.result()

    assert isinstance(failed.value.cause, ApplicationError)
    assert "node 'ask' (prompt) failed: prompt expired at" in failed.value.cause.message
    assert "on_expiry: fail" in failed.value.cause.message
    described = await runner.describe(handle)
    assert [r.status for r in described.node_reports if r.node_id == "ask"] == [NodeStatus.FAILED]
    [expired] = expiry_messages(await runner.messages(handle.id))
    assert expired["d"]["on_expiry"] == "fail"


async def test_expiry_after_30_days_skips_the_prompt_and_goes_on(runner: GraphRunner) -> None:
    handle = await runner.start(expiring_graph("expire-skip", "skip"))
    await runner.wait_for_prompt(handle, "ask")

    result = await handle.result()

    assert result.output == {"answer": None}  # the run went on, without an answer
    statuses = {r.node_id: r.status for r in result.node_reports}
    assert statuses == {"ask": NodeStatus.SKIPPED, "after": NodeStatus.SUCCESS}
    [expired] = expiry_messages(await runner.messages(handle.id))
    assert expired["d"]["on_expiry"] == "skip"


async def test_late_and_duplicate_answers_are_refused_and_change_nothing(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    graph = parse_graph(
        {
            "name": "late-duplicate",
            "entry": "first",
            "nodes": [
                {
                    "id": "first",
                    "type": "prompt",
                    "params": {"prompt": "First?", "expires_in_seconds": 60, "on_expiry": "skip"},
                },
                {"id": "second", "type": "prompt", "params": {"prompt": "Second?"}},
                {"id": "third", "type": "prompt", "params": {"prompt": "Third?"}},
            ],
            "edges": [{"from": "first", "to": "second"}, {"from": "second", "to": "third"}],
        }
    )
    handle = await runner.start(graph)
    await runner.wait_for_prompt(handle, "first")
    # Time moves only while the test waits on the server: skip past the minute.
    await time_skipping_env.sleep(timedelta(minutes=2))
    await runner.wait_for_prompt(handle, "second")

    with pytest.raises(WorkflowUpdateFailedError) as late:
        await runner.answer(handle, UserInput(message="yes", node_id="first"))
    assert isinstance(late.value.cause, ApplicationError)
    assert late.value.cause.type == "PromptExpired"

    await runner.answer(handle, UserInput(message="two", node_id="second"))
    await runner.wait_for_prompt(handle, "third")
    with pytest.raises(WorkflowUpdateFailedError) as duplicate:
        await runner.answer(handle, UserInput(message="two again", node_id="second"))
    assert isinstance(duplicate.value.cause, ApplicationError)
    assert duplicate.value.cause.type == "AlreadyAnswered"

    await runner.answer(handle, UserInput(message="three"))
    result = await handle.result()
    assert result.output == {"third_response": "three"}
    questions = [
        m["d"]["node_id"] for m in await runner.messages(handle.id) if m["t"] == M.QUESTION
    ]
    assert questions == ["second", "third"]  # neither refused answer reached the run


async def test_an_assigned_prompt_refuses_others_in_the_workflow_too(runner: GraphRunner) -> None:
    graph = parse_graph(
        {
            "name": "assigned",
            "entry": "ask",
            "nodes": [
                {
                    "id": "ask",
                    "type": "prompt",
                    "params": {"prompt": "Approve?", "assignees": ["bob"], "roles": ["approver"]},
                }
            ],
            "edges": [],
        }
    )
    handle = await runner.start(graph)
    waiting = await runner.wait_for_prompt(handle, "ask")
    assert waiting.pending_input is not None
    assert waiting.pending_input.assignees == ["bob"]
    assert waiting.pending_input.roles == ["approver"]

    for stranger in (
        UserInput(message="yes", user_id="eve"),
        UserInput(message="yes", user_id="eve", roles=["viewer"]),
    ):
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await runner.answer(handle, stranger)
        assert isinstance(refused.value.cause, ApplicationError)
        assert refused.value.cause.type == "Forbidden"

    await runner.answer(handle, UserInput(message="yes", user_id="carol", roles=["approver"]))
    result = await handle.result()
    assert result.output == {"ask_response": "yes"}
