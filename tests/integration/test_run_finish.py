"""How a run ends, on the real dev server: a run that asked no one and is no task
run ends without touching the prompts or the tasks (``finish_run`` skips both
round trips); a run that asked closes its prompt when it ends, also generations
later, and one canceled while it asks leaves no prompt behind (see also
tests/e2e/test_hitl_requests.py).

On the real server, not the time-skipping one: a cancel of an activity in the
workflow task where it completes gets ACTIVITY_UNKNOWN there and the run never
ends (temporalio/sdk-java issue 2391; the official server carries on), and a
cancel here can meet an ask or a notice in flight.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from pymongo import monitoring
from temporalio.client import Client, WorkflowFailureError

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
from spindle.shared.store.prompts import PromptStatus, PromptStore
from spindle.worker.examples import load_example
from spindle.worker.main import build_worker
from tests.polling import eventually
from tests.workflow.loop_and_prompt import loop_over_prompt_waiting
from tests.workflow.runs import GraphRunner, M

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


async def test_a_run_canceled_while_it_asks_leaves_no_prompt_behind(
    temporal_client: Client, settings: Settings
) -> None:
    """Canceled while its ``request_input`` is in flight: nothing is asked after the end.

    The prompt message, if it was posted at all, comes before TERMINATED, and no
    inbox keeps an open prompt of the canceled run.
    """
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    runner = GraphRunner(temporal_client, f"ask-cancel-{uuid.uuid4().hex[:10]}", bus, archive)
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=runner.task_queue
        ):
            handle = await runner.start(load_example("approval-flow"), {"topic": "cancel early"})

            async def asking() -> bool | None:
                pending = (await runner.describe(handle)).pending_input
                return True if pending is not None and pending.node_id == "review" else None

            await eventually(asking, what="the run starts to ask")
            await handle.cancel()
            with pytest.raises(WorkflowFailureError):
                await handle.result()
            messages = await runner.messages(handle.id)
            prompt = await PromptStore(archive.database).prompt_for(handle.id, "review")
    finally:
        await archive.close()
        await bus.close()
    assert messages[-1]["t"] == M.TERMINATED
    assert prompt is None or prompt.status is not PromptStatus.OPEN


async def test_a_run_canceled_generations_after_it_asked_closes_its_prompt(
    temporal_client: Client, settings: Settings
) -> None:
    # finish_run closes a run's prompts only if the run asked one: the generation
    # that ends must know that an earlier one did.
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    runner = GraphRunner(temporal_client, f"can-close-{uuid.uuid4().hex[:10]}", bus, archive)
    prompts = PromptStore(archive.database)
    workflow_id = f"can-close-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=runner.task_queue
        ):
            latest, waiting = await loop_over_prompt_waiting(runner, workflow_id)
            asked = await prompts.prompt_for(workflow_id, "ask")
            await latest.cancel()
            with pytest.raises(WorkflowFailureError):
                await latest.result()
        closed = await prompts.prompt_for(workflow_id, "ask")
    finally:
        await archive.close()
        await bus.close()
    assert waiting.generation >= 3
    assert asked is not None and asked.status is PromptStatus.OPEN
    assert closed is not None and closed.status is PromptStatus.CLOSED
