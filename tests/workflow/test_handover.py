"""``Handover``: what a generation hands to the next, and a handover called off."""

from __future__ import annotations

import pytest

from spindle.shared.contracts.envelope import CarriedEnvelopes, NodeMessage
from spindle.shared.contracts.runs import (
    CarriedState,
    GraphRunInput,
    NodeReport,
    NodeStatus,
    SchedulerSnapshot,
)
from spindle.worker.workflows.agent_session import AgentSessions
from spindle.worker.workflows.budget_meter import BudgetMeter
from spindle.worker.workflows.continue_as_new import CarriedParts, Handover
from spindle.worker.workflows.edge_envelopes import EdgeEnvelopes
from spindle.worker.workflows.human_input import HumanInput
from spindle.worker.workflows.run_deadline import RunDeadline
from spindle.worker.workflows.run_notices import RunNotices
from spindle.worker.workflows.run_progress import RunProgress
from spindle.worker.workflows.scheduler import Activation, GraphScheduler
from spindle.worker.workflows.workstreams.parent_supervisor import WorkstreamSupervisor
from tests.workflow.run_parts import RUN, no_notice, run_input

pytestmark = pytest.mark.unit

ENVELOPE = NodeMessage.model_validate(
    {"messageId": "m-1", "from": "fetch", "to": "fetch", "timestamp": "2026-11-29T08:00:01"}
)


def _parts(given: GraphRunInput) -> CarriedParts:
    budget = BudgetMeter(given.budget, None, no_notice)
    deadline = RunDeadline(given)
    workstreams = WorkstreamSupervisor(RUN, user_id=None, meter=budget, deadline_at=deadline.at)
    return CarriedParts(
        record=RunProgress(given),
        scheduler=GraphScheduler(given.graph),
        prompts=HumanInput(given.user_id),
        notices=RunNotices(RUN),
        workstreams=workstreams,
        budget=budget,
        deadline=deadline,
        agents=AgentSessions(RUN, workstreams),
        envelopes=EdgeEnvelopes(given.graph, RUN, "2026-11-29T09:00:00+00:00"),
    )


def test_the_next_generation_takes_over_what_was_carried() -> None:
    report = NodeReport(
        node_id="fetch", node_type="tool", status=NodeStatus.SUCCESS, started_at="t"
    )
    carried = CarriedState(
        generation=3,
        first_run_id="run-1",
        scheduler=SchedulerSnapshot(started=True, visits={"fetch": 7}),
        state={"input": {"q": 1}, "fetch": 7},
        output=7,
        reports=[report],
        report_counts={NodeStatus.SUCCESS: 7},
        notices=4,
        history_warned=True,
        workstream_counts={"ws": 2, "s": 1, "m": 0},
        deadline_at="2026-11-29T10:00:00+00:00",
        prompts_asked=True,
        envelopes=CarriedEnvelopes(
            start_time="2026-11-29T08:00:00+00:00",
            last_node="fetch",
            waiting={"fetch": [ENVELOPE]},
        ),
    )
    given = run_input(carried=carried)
    parts = _parts(given)
    handover = Handover(given, RUN, parts)
    handover.take_over(carried)
    assert handover.generation == 3
    assert parts.record.state == {"input": {"q": 1}, "fetch": 7}
    assert parts.record.output == 7
    assert list(parts.record.reports) == [report]
    assert parts.scheduler.visits("fetch") == 7
    assert parts.notices.count == 4
    assert parts.prompts.asked
    assert parts.workstreams.counts == {"ws": 2, "s": 1, "m": 0}
    assert parts.deadline.iso == "2026-11-29T10:00:00+00:00"
    # Envelopes on their way wait for their node in the next generation.
    assert parts.envelopes.start_time == "2026-11-29T08:00:00+00:00"
    parts.envelopes.activated("fetch")
    inbound = parts.envelopes.inbound("fetch", parts.record.state)
    assert [(e.message.from_, e.payload_key) for e in inbound] == [("fetch", "fetch")]
    assert parts.envelopes.carried().taken == {"fetch": [ENVELOPE]}


def test_nodes_activated_while_continuing_start_here_if_the_handover_is_called_off() -> None:
    given = run_input()
    handover = Handover(given, RUN, _parts(given))
    handover.continuing = True
    handover.defer(Activation("fetch", 2))
    handover.defer(Activation("done", 1))
    assert handover.call_off() == [Activation("fetch", 2), Activation("done", 1)]
    assert not handover.continuing
    assert handover.call_off() == []
