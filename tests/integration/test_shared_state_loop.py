"""A 1,000-node loop writing shared state keeps history per node flat (issue 32).

Two custom nodes in a loop, ``bump`` → ``note`` → ``bump`` …, on the dev server:
each writes shared state (``state.count`` set, ``state.seen`` merged) and context,
reads the other's envelope by port, and the run continues as new on the way. The
history bytes of a node (its activity's input and result, envelopes included)
must not grow with the run: the last 100 nodes within 10 % of the first 100.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from spindle.nodes import NodeContext, NodeResult, node_type
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.envelope import TRACE_STEPS_KEPT, StateUpdate
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.platform.settings import Settings
from spindle.worker.main import build_worker
from tests.history_volume import history_volume

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ITERATIONS = 499  # 2 * (1 + 499) = 1,000 node executions
SUFFIX = uuid.uuid4().hex[:6]
BUMP, NOTE = f"ss_bump_{SUFFIX}", f"ss_note_{SUFFIX}"


@node_type(BUMP)
async def bump(ctx: NodeContext) -> NodeResult:
    """``state.count`` + 1; what arrived on port ``back`` is the note's envelope."""
    count = int(ctx.shared_state.get("count", 0)) + 1
    back = ctx.input("back")
    sender = back.from_ if back is not None else ctx.input().from_  # type: ignore[union-attr]
    return NodeResult(
        data={"count": count, "from": sender, "seen": dict(ctx.shared_state.get("seen", {}))},
        state=StateUpdate(set={"count": count}, merge={"seen": {"bump": count}}),
        context=StateUpdate(set={"bumped": count}),
    )


@node_type(NOTE)
async def note(ctx: NodeContext) -> NodeResult:
    """Notes the count it received in ``state.seen``."""
    arrived = ctx.input()
    assert arrived is not None and arrived.from_ == "bump"
    return NodeResult(
        data=arrived.payload,
        state=StateUpdate(merge={"seen": {"note": arrived.payload["count"]}}),
    )


def loop_graph() -> object:
    spec = parse_graph(
        {
            "name": "shared-state-loop",
            "entry": "bump",
            "state": {"writable": ["count", "seen"]},
            "nodes": [
                {"id": "bump", "type": BUMP, "max_visits": ITERATIONS + 1},
                {"id": "note", "type": NOTE, "max_visits": ITERATIONS + 1},
            ],
            "edges": [
                {"from": "bump", "to": "note"},
                {"from": "note", "to": "bump", "to_port": "back", "max_iterations": ITERATIONS},
            ],
        }
    )
    validate_structure(spec)
    return spec


@pytest.fixture(scope="module")
async def state_worker(temporal_client: Client, settings: Settings) -> AsyncIterator[str]:
    bus = MessageBus.from_settings(settings)
    task_queue = f"state-loop-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=None, task_queue=task_queue
        ):
            yield task_queue
    finally:
        await bus.close()


async def test_a_thousand_nodes_write_shared_state_with_flat_history(
    temporal_client: Client, state_worker: str
) -> None:
    workflow_id = f"state-loop-{uuid.uuid4().hex[:8]}"
    handle = await temporal_client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(
            graph=loop_graph(),  # type: ignore[arg-type]
            input={"go": True},
            continue_as_new_after_events=2000,
        ),
        id=workflow_id,
        task_queue=state_worker,
        result_type=GraphRunResult,
    )
    result = await handle.result()

    assert result.status is RunStatus.COMPLETED
    assert result.report_counts == {"SUCCESS": 1000}
    assert result.generation > 1  # shared state crossed continue-as-new
    # The last note passes on the last bump's data: what shared state held then.
    last_count = ITERATIONS + 1
    assert result.output == {
        "count": last_count,
        "from": "note",
        "seen": {"bump": last_count - 1, "note": last_count - 1},
    }

    volume = await history_volume(temporal_client, workflow_id, handle.first_execution_run_id or "")
    assert len(volume.node_bytes) == 1000
    # Past the first TRACE_STEPS_KEPT nodes the trace no longer grows.
    first = volume.mean_bytes(2 * TRACE_STEPS_KEPT, 2 * TRACE_STEPS_KEPT + 100)
    last = volume.mean_bytes(-100, None)
    print(f"\nbytes per node: first 100 {first:.0f}, last 100 {last:.0f}")
    assert abs(last - first) <= 0.10 * first
