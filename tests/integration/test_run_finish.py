"""How a run ends, on the real dev server: a run that asked no one and is no task
run ends without touching the prompts or the tasks (``finish_run`` skips both
round trips); a run that asked closes its prompt when it ends, also generations
later, and one canceled while it asks leaves no prompt behind (see also
tests/e2e/test_hitl_requests.py); one canceled inside an activity of its own (a
WARNING notice, a scheduled run's ``record_start``) still ends canceled.

On the real server, not the time-skipping one: a cancel of an activity in the
workflow task where it completes gets ACTIVITY_UNKNOWN there and the run never
ends (temporalio/sdk-java issue 2391; the official server carries on), and these
cancels meet activities in flight on purpose.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pymongo import monitoring
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.runs import GRAPH_RUN_WORKFLOW, GraphRunInput, RunStatus
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.prompts import PromptStatus, PromptStore
from spindle.worker.contracts import POST_MESSAGE, RECORD_RUN_START, RunNotice, RunStart
from spindle.worker.examples import load_example
from spindle.worker.main import build_worker
from tests.integration.held_activity import (
    LOOP_ONCE,
    HeldActivity,
    assert_ended_canceled,
    cancel_while_held,
)
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


@pytest.fixture(scope="module")
async def runner(
    temporal_client: Client, settings: Settings, listener: CollectionCommands
) -> AsyncIterator[GraphRunner]:
    """A production worker on a task queue of this module's own, on the dev server.

    After ``listener``: pymongo watches only the clients made once it is registered.
    """
    bus = MessageBus.from_settings(settings)
    archive = RunArchive.from_settings(settings)
    task_queue = f"finish-{uuid.uuid4().hex[:10]}"
    try:
        async with build_worker(
            temporal_client, settings, bus=bus, archive=archive, task_queue=task_queue
        ):
            yield GraphRunner(temporal_client, task_queue, bus, archive)
    finally:
        await archive.close()
        await bus.close()


async def test_a_run_that_asked_no_one_ends_without_touching_prompts_or_tasks(
    runner: GraphRunner, listener: CollectionCommands
) -> None:
    handle = await runner.start(CHAIN, {})
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    document = await runner.archive.database["runs"].find_one({"_id": handle.id})
    assert document is not None and document["status"] == "completed"
    assert [(name, target) for name, target, text in listener.seen if handle.id in text] == []


async def test_a_run_canceled_while_it_asks_leaves_no_prompt_behind(runner: GraphRunner) -> None:
    """Canceled while its ``request_input`` is in flight: nothing is asked after the end.

    The prompt message, if it was posted at all, comes before TERMINATED, and no
    inbox keeps an open prompt of the canceled run.
    """
    handle = await runner.start(load_example("approval-flow"), {"topic": "cancel early"})

    async def asking() -> bool | None:
        pending = (await runner.describe(handle)).pending_input
        return True if pending is not None and pending.node_id == "review" else None

    await eventually(asking, what="the run starts to ask")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    messages = await runner.messages(handle.id)
    prompt = await PromptStore(runner.archive.database).prompt_for(handle.id, "review")
    assert messages[-1]["t"] == M.TERMINATED
    assert prompt is None or prompt.status is not PromptStatus.OPEN


async def test_a_run_canceled_generations_after_it_asked_closes_its_prompt(
    runner: GraphRunner,
) -> None:
    # finish_run closes a run's prompts only if the run asked one: the generation
    # that ends must know that an earlier one did.
    prompts = PromptStore(runner.archive.database)
    workflow_id = f"can-close-{uuid.uuid4().hex[:10]}"
    latest, waiting = await loop_over_prompt_waiting(runner, workflow_id)
    asked = await prompts.prompt_for(workflow_id, "ask")
    await latest.cancel()
    with pytest.raises(WorkflowFailureError):
        await latest.result()
    closed = await prompts.prompt_for(workflow_id, "ask")
    assert waiting.generation >= 3
    assert asked is not None and asked.status is PromptStatus.OPEN
    assert closed is not None and closed.status is PromptStatus.CLOSED


async def test_a_run_canceled_while_it_posts_a_notice_ends_canceled(
    runner: GraphRunner, settings: Settings
) -> None:
    # The SDK turns the cancel of a task awaiting an activity into an ActivityError;
    # the run's best-effort notice must not take it for a failed post and go on.
    held = HeldActivity(
        runner, settings, POST_MESSAGE, RunNotice, lambda n: n.type == int(M.WARNING)
    )
    handle = await cancel_while_held(held, lambda held_runner: held_runner.start(LOOP_ONCE, {}))
    await assert_ended_canceled(runner, handle)


async def test_a_scheduled_run_canceled_while_it_records_its_start_ends_canceled(
    runner: GraphRunner, settings: Settings
) -> None:
    # Not an ActivityError out of the run: its cancel path stops it and finish_run
    # writes it canceled; the late start record leaves that status alone.
    held = HeldActivity(runner, settings, RECORD_RUN_START, RunStart, lambda start: True)

    async def start(held_runner: GraphRunner) -> WorkflowHandle[Any, Any]:
        return await held_runner.client.start_workflow(
            GRAPH_RUN_WORKFLOW,
            GraphRunInput(graph=CHAIN, input={}, scheduled_by="nightly"),
            id=f"scheduled-{uuid.uuid4().hex[:10]}",
            task_queue=held_runner.task_queue,
        )

    handle = await cancel_while_held(held, start)
    await assert_ended_canceled(runner, handle)
