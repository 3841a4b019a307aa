"""History bytes per node of a graph run, read from its Temporal history.

Follows the run's continue-as-new chain from its first run, and for every
``execute_node`` activity adds the bytes of its input payloads (ActivityTaskScheduled)
and its result payloads (ActivityTaskCompleted): what the node cost in history.
Shared by the long-run integration test and the benchmark's ``history`` section.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.worker.contracts import EXECUTE_NODE


def loop_graph(iterations: int) -> GraphSpec:
    """Two ``tool`` nodes in a loop, ``fetch`` → ``count`` → ``fetch`` …: the graph of
    docs/design.md §10, ``2 * (iterations + 1)`` node executions."""
    spec = parse_graph(
        {
            "name": "long-loop",
            "entry": "fetch",
            "nodes": [
                {
                    "id": "fetch",
                    "type": "tool",
                    "max_visits": iterations + 1,
                    "params": {"tool": "word_count", "args": {"text": "{{ input.text }}"}},
                },
                {
                    "id": "count",
                    "type": "tool",
                    "max_visits": iterations + 1,
                    "inputs": {"args": "{text: input.text}"},
                    "params": {"tool": "word_count"},
                },
            ],
            "edges": [
                {"from": "fetch", "to": "count"},
                {"from": "count", "to": "fetch", "max_iterations": iterations},
            ],
        }
    )
    validate_structure(spec)
    return spec


def _size(payloads: Payloads) -> int:
    return sum(p.ByteSize() for p in payloads.payloads)


@dataclass
class HistoryVolume:
    """What a run's histories hold, generation by generation."""

    node_bytes: list[int] = field(default_factory=list)
    """Per execute_node activity, in order: input + result payload bytes."""
    generations: int = 0
    events: list[int] = field(default_factory=list)
    """Events per generation."""

    def mean_bytes(self, start: int, stop: int | None) -> float:
        chunk = self.node_bytes[start:stop]
        return sum(chunk) / len(chunk)


async def history_volume(client: Client, workflow_id: str, first_run_id: str) -> HistoryVolume:
    """Walk the chain of runs of ``workflow_id`` from ``first_run_id``."""
    volume = HistoryVolume()
    run_id: str | None = first_run_id
    while run_id:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        volume.generations += 1
        volume.events.append(len(history.events))
        scheduled: dict[int, int] = {}
        run_id = None
        for event in history.events:
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attrs = event.activity_task_scheduled_event_attributes
                if attrs.activity_type.name == EXECUTE_NODE:
                    scheduled[event.event_id] = _size(attrs.input)
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                done = event.activity_task_completed_event_attributes
                if done.scheduled_event_id in scheduled:
                    volume.node_bytes.append(
                        scheduled.pop(done.scheduled_event_id) + _size(done.result)
                    )
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                run_id = (
                    event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                )
    return volume
