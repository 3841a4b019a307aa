"""What a run's end costs MongoDB: a run that asked no one and is no task run
ends without touching the prompts or the tasks (``finish_run`` skips both
round trips); a run that asked closes its prompt (tests/workflow and tests/e2e).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pymongo import monitoring
from temporalio.client import Client

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import (
    GRAPH_RUN_WORKFLOW,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
)
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.worker.main import build_worker

pytestmark = pytest.mark.integration

CHAIN = parse_graph(
    {
        "name": "finish-chain",
        "entry": "a",
        "nodes": [
            {"id": n, "type": "tool", "params": {"tool": "word_count", "args": {"text": n}}}
            for n in ("a", "b", "c")
        ],
        "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}],
    }
)


class CollectionCommands(monitoring.CommandListener):
    """The commands sent to some collections, with the text of each."""

    def __init__(self, collections: set[str]) -> None:
        self.collections = collections
        self.seen: list[tuple[str, str, str]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        target = event.command.get(event.command_name)
        if isinstance(target, str) and target in self.collections:
            self.seen.append((event.command_name, target, str(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture(scope="module")
def listener() -> Iterator[CollectionCommands]:
    commands = CollectionCommands({"prompts", "tasks"})
    # pymongo applies a registered listener to the clients made after it.
    monitoring.register(commands)
    yield commands
    commands.collections = set()  # pymongo cannot unregister: let it go quiet


async def test_a_run_that_asked_no_one_ends_without_touching_prompts_or_tasks(
    temporal_client: Client, settings: Settings, listener: CollectionCommands
) -> None:
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    task_queue = f"finish-{uuid.uuid4().hex[:10]}"
    workflow_id = f"finish-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=task_queue
        ):
            result = await temporal_client.execute_workflow(
                GRAPH_RUN_WORKFLOW,
                GraphRunInput(graph=CHAIN, input={}),
                id=workflow_id,
                task_queue=task_queue,
                result_type=GraphRunResult,
            )
        assert result.status is RunStatus.COMPLETED
        document = await archive.database["runs"].find_one({"_id": workflow_id})
    finally:
        await archive.close()
        await bus.close()
    assert document is not None and document["status"] == "completed"
    assert [(name, target) for name, target, text in listener.seen if workflow_id in text] == []
