"""Who takes a user message in the first workflow task of a generation, before the
idle agent it carried is reopened (found by tests/integration/test_long_chat.py:
the message was refused with 409 "no agent ... is listening")."""

from __future__ import annotations

from typing import Any, cast

import pytest
from temporalio.exceptions import ApplicationError

from spindle.shared.contracts.runs import CarriedAgent, UserInput
from spindle.worker.contracts import RunRef
from spindle.worker.workflows.agent_session import AgentSessions

pytestmark = pytest.mark.unit

RUN = RunRef(workflow_id="wf", run_id="r1", stream_id="wf", graph_name="chat")


def sessions(carried: dict[str, CarriedAgent] | None) -> AgentSessions:
    workstreams = cast(Any, object())  # not consulted before a session opens
    return AgentSessions(RUN, workstreams, carried)


def idle_agent() -> CarriedAgent:
    return CarriedAgent(visit=1, started_at="2026-11-29T00:00:00+00:00", loop_id="chat.1")


def test_a_message_for_a_carried_agent_waits_for_it_instead_of_being_refused() -> None:
    registry = sessions({"chat": idle_agent()})
    assert registry.check_message(UserInput(message="hi")) is None
    assert registry.check_message(UserInput(message="hi", node_id="chat")) is None


def test_a_message_for_no_agent_is_still_refused_naming_why() -> None:
    registry = sessions({"chat": idle_agent()})
    with pytest.raises(ApplicationError) as refused:
        registry.check_message(UserInput(message="hi", node_id="other"))
    assert refused.value.type == "NotWaiting"
    assert "agent 'other' of the main workstream is not listening" in str(refused.value)
    with pytest.raises(ApplicationError, match="no agent of the main workstream is listening"):
        sessions(None).check_message(UserInput(message="hi"))
