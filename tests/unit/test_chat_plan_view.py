"""``spindle chat`` shows a PLAN posted by ``update_plan`` as a checklist (seed 002;
docs/graphs/tools.md#plans), and other plans (the agent loop's own) as a numbered list."""

from __future__ import annotations

import io

import pytest

from spindle.cli.chat.view import ChatView
from spindle.cli.terminal_output import TerminalOutput
from spindle.client import StreamedMessage
from spindle.shared.contracts.messages import AgentMessageType as T
from spindle.shared.contracts.messages import PlanDetails, PlanTask, create_compact_message
from spindle.worker.tools.plans import plan_text

pytestmark = pytest.mark.unit


def shown(details: dict[str, object], text: str) -> list[str]:
    out = io.StringIO()
    chat = ChatView(TerminalOutput(out, live=False, color=False, width=lambda: 80))
    compact = create_compact_message(T.PLAN, text, details=details)
    chat.show(StreamedMessage.of(compact, "r", seq=None, replayed=False))
    return out.getvalue().splitlines()


def test_an_update_plan_is_a_checklist_with_its_statuses() -> None:
    tasks = [
        PlanTask(title="Read the notes", status="done"),
        PlanTask(title="Draft the answer", status="in_progress"),
        PlanTask(title="Review", status="pending"),
    ]
    details = PlanDetails(node_id="lead", tasks=tasks, explanation="Notes read.")
    lines = shown(details.model_dump(exclude_none=True), plan_text(tasks, "Notes read."))
    assert lines == [
        "PLAN       Plan: 1 of 3 tasks done. Notes read.",
        "           [x] Read the notes",
        "           [~] Draft the answer",
        "           [ ] Review",
    ]


def test_a_plan_without_statuses_stays_a_numbered_list() -> None:
    lines = shown({"tasks": ["search", {"title": "summarise"}]}, "The plan")
    assert lines == ["PLAN       The plan", "           1. search", "           2. summarise"]
