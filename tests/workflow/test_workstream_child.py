"""The ``Workstream`` child workflow on the time-skipping server.

Real activities (Redis bus, nx-27017 archive and file store, real tools); only
the LLM is scripted: per child, a queue of replies and turns the test holds open
to model a long step. A stub parent records the child's progress signals.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import AgentMessageType
from spindle.shared.contracts.workstreams import (
    CHILD_MESSAGE_SIGNAL,
    CHILD_STATE_QUERY,
    CHILD_STEER_SIGNAL,
    CHILD_STOP_SIGNAL,
    WORKSTREAM_PROGRESS_SIGNAL,
    WORKSTREAM_WORKFLOW,
    ChildMessage,
    ChildState,
    ChildStop,
    LaunchRequest,
    Progress,
    SteerCommand,
    SteerDirective,
    WorkstreamAgent,
    WorkstreamInput,
    WorkstreamOutcome,
    WorkstreamPhase,
    WorkstreamState,
    child_workflow_id,
)
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive
from spindle.shared.store.file_store import FileStore
from spindle.worker.activities import build_activities
from spindle.worker.activities.workstream import workstream_activities
from spindle.worker.contracts import ChatMessage, ToolCall
from spindle.worker.llm.base import LlmRequest, LlmResponse
from spindle.worker.sandbox import PASSTHROUGH_MODULES
from spindle.worker.workflows.workstreams.child_agent import (
    MAX_CONVERSATION,
    STANDING_HEADER,
    bounded,
    opening,
)
from spindle.worker.workflows.workstreams.child_workflow import Workstream
from tests.polling import eventually
from tests.workflow.runs import cancel_run

pytestmark = pytest.mark.workflow

M = AgentMessageType
PROGRESS_QUERY = "progress"


@workflow.defn(name="StubParent")
class StubParent:
    """Stands in for ``GraphRun``: records progress, never ends by itself (the
    time-skipping server times it out once a test awaits a result)."""

    def __init__(self) -> None:
        self.progress: list[Progress] = []

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.signal(name=WORKSTREAM_PROGRESS_SIGNAL)
    def on_progress(self, progress: Progress) -> None:
        self.progress.append(progress)

    @workflow.query(name=PROGRESS_QUERY)
    def recorded(self) -> list[Progress]:
        return list(self.progress)


def assistant(text: str | None = None, *calls: tuple[str, dict[str, Any]]) -> ChatMessage:
    tool_calls = [ToolCall(id=f"c{i}", name=n, arguments=a) for i, (n, a) in enumerate(calls)]
    return ChatMessage(role="assistant", content=text, tool_calls=tool_calls)


@dataclass
class ScriptedLlm:
    """The LLM: scripted replies per child workflow id, else "answer to: <last user>".

    ``hold(wf, n)`` keeps the n-th call of that child open until released.
    """

    name: str = "scripted"
    requests: dict[str, list[LlmRequest]] = field(default_factory=lambda: defaultdict(list))
    scripts: dict[str, list[ChatMessage]] = field(default_factory=lambda: defaultdict(list))
    holds: dict[tuple[str, int], asyncio.Event] = field(default_factory=dict)

    def hold(self, workflow_id: str, call: int) -> asyncio.Event:
        return self.holds.setdefault((workflow_id, call), asyncio.Event())

    def release_all(self) -> None:
        for event in self.holds.values():
            event.set()

    async def complete(self, request: LlmRequest) -> LlmResponse:
        workflow_id = activity.info().workflow_id or ""
        calls = self.requests[workflow_id]
        calls.append(request)
        held = self.holds.get((workflow_id, len(calls)))
        if held is not None:
            await held.wait()
        script = self.scripts[workflow_id]
        if script:
            return LlmResponse(message=script.pop(0), model="scripted")
        last_user = next(m.content for m in reversed(request.messages) if m.role == "user")
        return LlmResponse(message=assistant(f"answer to: {last_user}"), model="scripted")


@dataclass
class Harness:
    client: Client
    task_queue: str
    llm: ScriptedLlm
    bus: MessageBus
    files: FileStore

    async def start_parent(self) -> WorkflowHandle[Any, Any]:
        return await self.client.start_workflow(
            "StubParent", id=f"parent-{uuid.uuid4().hex[:10]}", task_queue=self.task_queue
        )

    async def start_child(
        self,
        parent_id: str,
        *,
        task: str = "Add 2 and 2",
        interactive: bool = False,
        tools: list[str] | None = None,
        continue_as_new_after: int = 200,
    ) -> WorkflowHandle[Any, WorkstreamOutcome]:
        launch = LaunchRequest(
            task=task,
            interactive=interactive,
            agent=WorkstreamAgent(system="You are a careful assistant.", tools=tools or []),
        )
        data = WorkstreamInput(
            launch=launch,
            launch_id="ws-1",
            parent_workflow_id=parent_id,
            stream_id=parent_id,
            tenant_id="t-ws",
            graph_name="stub",
            continue_as_new_after=continue_as_new_after,
        )
        return await self.client.start_workflow(
            WORKSTREAM_WORKFLOW,
            data,
            id=child_workflow_id(parent_id, "ws-1"),
            task_queue=self.task_queue,
            result_type=WorkstreamOutcome,
        )

    async def messages(self, stream_id: str) -> list[dict[str, Any]]:
        return [orjson.loads(m.raw) for m in await self.bus.history(stream_id)]

    async def wait_messages(
        self, stream_id: str, what: str, probe: Any, timeout: float = 15.0
    ) -> list[dict[str, Any]]:
        async def check() -> list[dict[str, Any]] | None:
            messages = await self.messages(stream_id)
            return messages if probe(messages) else None

        return await eventually(check, what=what, timeout=timeout)

    @staticmethod
    async def state(handle: WorkflowHandle[Any, Any]) -> ChildState:
        state: ChildState = await handle.query(CHILD_STATE_QUERY, result_type=ChildState)
        return state

    async def wait_state(
        self, handle: WorkflowHandle[Any, Any], what: str, probe: Any
    ) -> ChildState:
        async def check() -> ChildState | None:
            state = await self.state(handle)
            return state if probe(state) else None

        return await eventually(check, what=what)

    async def wait_calls(self, workflow_id: str, count: int) -> None:
        await eventually(
            lambda: len(self.llm.requests[workflow_id]) >= count,
            what=f"LLM call {count} of {workflow_id}",
        )


@pytest.fixture(scope="module")
async def harness(
    time_skipping_env: WorkflowEnvironment,
    worker_settings: Settings,
    run_bus: MessageBus,
    run_archive: RunArchive,
) -> AsyncIterator[Harness]:
    llm = ScriptedLlm()
    task_queue = f"ws-{uuid.uuid4().hex[:10]}"
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            *PASSTHROUGH_MODULES, "tests"
        )
    )
    worker = Worker(
        time_skipping_env.client,
        task_queue=task_queue,
        workflows=[Workstream, StubParent],
        activities=[
            *build_activities(run_bus, run_archive, llm, settings=worker_settings),
            *workstream_activities(run_bus, run_archive, settings=worker_settings),
        ],
        workflow_runner=runner,
    )
    async with worker:
        yield Harness(
            time_skipping_env.client, task_queue, llm, run_bus, FileStore(run_archive.database)
        )
        llm.release_all()


def steer(steer_id: str, command: SteerCommand, text: str | None = None) -> SteerDirective:
    return SteerDirective(steer_id=steer_id, command=command, text=text)


def of(messages: list[dict[str, Any]], kind: AgentMessageType) -> list[dict[str, Any]]:
    return [m for m in messages if m["t"] == kind]


def acks(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["d"]["steer_id"]: m for m in of(messages, M.SYSTEM) if "steer_id" in m.get("d", {})}


async def test_steers_are_acknowledged_and_pause_holds_every_step(harness: Harness) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    harness.llm.scripts[child_id] = [
        assistant("I will compute it.", ("calculator", {"expression": "2+2"})),
        assistant("The sum is 4."),
    ]
    first_turn = harness.llm.hold(child_id, 1)
    handle = await harness.start_child(parent.id, tools=["calculator"])
    await harness.wait_calls(child_id, 1)

    # While turn 1 runs, every command arrives; they apply at the next boundary
    # (step 2: the tool call), and the pause holds it.
    for directive in (
        steer("s-1", SteerCommand.ADD_INSTRUCTION, "Show your work."),
        steer("s-2", SteerCommand.SET_PRIORITY, "Accuracy over speed."),
        steer("s-3", SteerCommand.ADD_CONSTRAINT, "Use the calculator only once."),
        steer("s-4", SteerCommand.PAUSE_REQUESTED),
        steer("s-5", SteerCommand.PAUSE_REQUESTED),
    ):
        await handle.signal(CHILD_STEER_SIGNAL, directive)
    first_turn.set()

    paused = await harness.wait_state(
        handle, "paused", lambda s: s.paused and s.phase == WorkstreamPhase.BLOCKED
    )
    assert paused.iteration == 1
    assert paused.applied_steers == ["s-1", "s-2", "s-3", "s-4"]
    assert len(paused.instructions) == 3
    messages = await harness.wait_messages(parent.id, "5 acks", lambda ms: len(acks(ms)) == 5)
    by_id = acks(messages)
    for steer_id in ("s-1", "s-2", "s-3", "s-4"):
        assert by_id[steer_id]["d"]["status"] == "applied"
        assert by_id[steer_id]["d"]["applied_at_step"] == 2
        assert by_id[steer_id]["w"] == "ws-1"
    assert by_id["s-1"]["m"] == "steer s-1 (add_instruction) applied at step 2"
    assert by_id["s-5"]["d"]["status"] == "rejected"
    assert by_id["s-5"]["d"]["reason"] == "already paused"
    # Paused: no tool ran, no further LLM call.
    assert not [m for m in messages if m["t"] == M.UPDATE and "calculator" in (m.get("m") or "")]
    assert len(harness.llm.requests[child_id]) == 1

    await handle.signal(CHILD_STEER_SIGNAL, steer("s-6", SteerCommand.RESUME_REQUESTED))
    await handle.signal(CHILD_STEER_SIGNAL, steer("s-7", SteerCommand.RESUME_REQUESTED))
    outcome = await handle.result()

    assert outcome.state == WorkstreamState.COMPLETED
    assert outcome.output == "The sum is 4."
    assert outcome.iterations == 3  # LLM turn, tool call, LLM turn
    assert outcome.artifacts == ["out/result.md"]
    messages = await harness.messages(parent.id)
    by_id = acks(messages)
    assert by_id["s-6"]["d"]["status"] == "applied"
    assert by_id["s-6"]["d"]["applied_at_step"] == 2
    assert by_id["s-7"]["d"] | {"status": "rejected", "reason": "not paused"} == by_id["s-7"]["d"]
    # The tool ran after the resume, and the second turn saw the three instructions.
    tool_use = [m for m in of(messages, M.UPDATE) if m["d"].get("tool") == "calculator"]
    assert tool_use and tool_use[0]["w"] == "ws-1"
    second = harness.llm.requests[child_id][1].messages
    injected = [m.content for m in second if m.role == "user"][1:]
    assert injected == [
        "Additional instruction (steer s-1): Show your work.",
        "New priority (steer s-2): Accuracy over speed.",
        "Constraint (steer s-3): Use the calculator only once.",
    ]
    assert [m["t"] for m in messages if m.get("w") == "ws-1"][-1] == M.COMPLETE
    complete = of(messages, M.COMPLETE)[-1]
    assert complete["m"] == "The sum is 4." and complete["d"]["status"] == "completed"
    stored = await harness.files.get(tenant_id="t-ws", workflow_id=child_id, name="out/result.md")
    content = b"".join([chunk async for chunk in harness.files.open(stored)])
    assert content.decode() == "The sum is 4."

    progress = await parent.query(PROGRESS_QUERY, result_type=list[Progress])
    phases = [(p.phase, p.tool) for p in progress]
    assert phases == [
        (WorkstreamPhase.PLANNING, None),
        (WorkstreamPhase.BLOCKED, None),
        (WorkstreamPhase.EXECUTING_TOOL, "calculator"),
        (WorkstreamPhase.SYNTHESIZING, None),
        (WorkstreamPhase.DONE, None),
    ]
    assert [p.iteration for p in progress] == [1, 1, 2, 3, 3]
    assert progress[-1].message == "The sum is 4."


async def test_interactive_answers_each_message_until_terminated(harness: Harness) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    handle = await harness.start_child(parent.id, task="Be my glossary.", interactive=True)
    await harness.wait_state(handle, "waiting after the task", lambda s: s.waiting_for_message)

    for n, text in enumerate(["Define latency.", "Define throughput."], start=1):
        await handle.signal(CHILD_MESSAGE_SIGNAL, ChildMessage(message_id=f"m-{n}", text=text))
        await harness.wait_state(
            handle,
            f"answer {n}",
            lambda s, text=text: s.waiting_for_message and s.last_answer == f"answer to: {text}",
        )
    # Each turn saw the conversation so far.
    last = harness.llm.requests[child_id][-1].messages
    assert [m.content for m in last if m.role == "user"] == [
        "Be my glossary.",
        "Define latency.",
        "Define throughput.",
    ]
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="terminate"))
    outcome = await handle.result()

    assert outcome.state == WorkstreamState.CANCELED
    assert outcome.output == "answer to: Define throughput."
    messages = [m for m in await harness.messages(parent.id) if m.get("w") == "ws-1"]
    assert [m["m"] for m in of(messages, M.ANSWER)] == [
        "answer to: Be my glossary.",
        "answer to: Define latency.",
        "answer to: Define throughput.",
    ]
    assert messages[-1]["t"] == M.COMPLETE and messages[-1]["d"]["status"] == "canceled"


async def test_messages_sent_mid_turn_queue_and_are_acknowledged_in_order(
    harness: Harness,
) -> None:
    parent = await harness.start_parent()
    handle = await harness.start_child(parent.id, task="Be my glossary.", interactive=True)
    # Sent while the child works on its task: both wait for the next boundary.
    for n, text in enumerate(["Define latency.", "Define throughput."], start=1):
        await handle.signal(CHILD_MESSAGE_SIGNAL, ChildMessage(message_id=f"m-{n}", text=text))
    messages = await harness.wait_messages(
        parent.id,
        "two message acks and three answers",
        lambda ms: len(of([m for m in ms if m.get("w") == "ws-1"], M.ANSWER)) == 3,
    )
    mine = [m for m in messages if m.get("w") == "ws-1"]
    acked = [m for m in of(mine, M.SYSTEM) if "message_id" in (m.get("d") or {})]
    assert [(m["d"]["message_id"], m["d"]["status"]) for m in acked] == [
        ("m-1", "applied"),
        ("m-2", "applied"),
    ]
    # Each applied at the step that first runs with it (the task was step 1), in order.
    assert [m["d"]["applied_at_step"] for m in acked] == [2, 3]
    assert acked[0]["m"] == "message m-1 applied at step 2"
    order = [m["m"] for m in mine if m["t"] in (M.ANSWER, M.SYSTEM)]
    assert order == [
        "answer to: Be my glossary.",
        "message m-1 applied at step 2",
        "answer to: Define latency.",
        "message m-2 applied at step 3",
        "answer to: Define throughput.",
    ]
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="terminate"))
    assert (await handle.result()).state == WorkstreamState.CANCELED


async def progress_of(parent: WorkflowHandle[Any, Any]) -> list[Progress]:
    recorded: list[Progress] = await parent.query(PROGRESS_QUERY, result_type=list[Progress])
    return recorded


async def test_a_reply_costs_the_parent_one_progress_signal_unless_it_runs_long(
    harness: Harness,
) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    handle = await harness.start_child(parent.id, task="Be my glossary.", interactive=True)
    await harness.wait_state(handle, "waiting after the task", lambda s: s.waiting_for_message)
    before = len(await progress_of(parent))

    # A quick reply: its "planning" is superseded by "blocked" before it is sent.
    await handle.signal(CHILD_MESSAGE_SIGNAL, ChildMessage(message_id="m-1", text="Define p99."))
    await harness.wait_state(
        handle, "answer 1", lambda s: s.last_answer == "answer to: Define p99."
    )
    quick = await eventually(
        lambda: _progress_after(parent, before, 1), what="the parent hears of answer 1"
    )
    assert [(p.phase, p.iteration) for p in quick] == [(WorkstreamPhase.BLOCKED, 2)]

    # A long one: the parent learns it is planning while the turn runs.
    released = harness.llm.hold(child_id, 3)
    await handle.signal(CHILD_MESSAGE_SIGNAL, ChildMessage(message_id="m-2", text="Define p50."))
    planning = await eventually(
        lambda: _progress_after(parent, before + 1, 1), what="planning reaches the parent"
    )
    assert [(p.phase, p.iteration) for p in planning] == [(WorkstreamPhase.PLANNING, 3)]
    released.set()
    done = await eventually(
        lambda: _progress_after(parent, before + 2, 1), what="the parent hears of answer 2"
    )
    assert [(p.phase, p.message) for p in done] == [
        (WorkstreamPhase.BLOCKED, "answer to: Define p50.")
    ]

    # Acks and notices are local activities: no activity task of their own.
    history = await handle.fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert scheduled == ["llm_turn"] * 3
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="terminate"))
    assert (await handle.result()).state == WorkstreamState.CANCELED


async def _progress_after(
    parent: WorkflowHandle[Any, Any], start: int, count: int
) -> list[Progress] | None:
    recorded = (await progress_of(parent))[start:]
    return recorded if len(recorded) >= count else None


async def test_interactive_continue_as_new_keeps_its_state(harness: Harness) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    handle = await harness.start_child(
        parent.id, task="Remember the code word.", interactive=True, continue_as_new_after=2
    )
    first_run = (await handle.describe()).run_id
    await harness.wait_state(handle, "waiting", lambda s: s.waiting_for_message)
    await handle.signal(CHILD_STEER_SIGNAL, steer("s-1", SteerCommand.ADD_CONSTRAINT, "Be brief."))
    await handle.signal(
        CHILD_MESSAGE_SIGNAL, ChildMessage(message_id="m-1", text="The word is kiwi.")
    )

    # Wait for the new run through describe, not a query: the test server can lose
    # a query that reaches the old run as it continues-as-new (and then stops
    # skipping time), so the state is asked only of the new run.
    async def continued() -> str | None:
        run_id = (await handle.describe()).run_id
        return run_id if run_id != first_run else None

    await eventually(continued, what="the workstream continued as new")
    state = await harness.wait_state(handle, "next generation", lambda s: s.generation == 1)
    assert state.iteration == 2
    assert state.instructions == ["Constraint (steer s-1): Be brief."]
    assert state.applied_steers == ["s-1"]
    assert state.last_answer == "answer to: The word is kiwi."
    assert (await handle.describe()).run_id != first_run

    await handle.signal(CHILD_MESSAGE_SIGNAL, ChildMessage(message_id="m-2", text="Which word?"))
    await harness.wait_state(
        handle, "third answer", lambda s: s.last_answer == "answer to: Which word?"
    )
    after = harness.llm.requests[child_id][-1].messages
    # The conversation is the child's memory; its system prompt restates the standing
    # instructions (docs/conversations.md, Memory).
    assert [m.content for m in after if m.role in ("user", "system")] == [
        f"You are a careful assistant.\n\n{STANDING_HEADER}\nConstraint (steer s-1): Be brief.",
        "Remember the code word.",
        "Constraint (steer s-1): Be brief.",
        "The word is kiwi.",
        "Which word?",
    ]
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="terminate"))
    outcome = await handle.result()
    assert outcome.state == WorkstreamState.CANCELED
    assert outcome.iterations == 3


async def test_graceful_timeout_returns_the_partial_answer_without_a_parent(
    harness: Harness,
) -> None:
    parent_id = f"gone-{uuid.uuid4().hex[:10]}"  # no such workflow: progress signals fail
    child_id = child_workflow_id(parent_id, "ws-1")
    harness.llm.scripts[child_id] = [
        assistant("Partial: the first half is done.", ("word_count", {"text": "a b c"})),
        assistant("never asked"),
    ]
    first_turn = harness.llm.hold(child_id, 1)
    handle = await harness.start_child(parent_id, tools=["word_count"])
    await harness.wait_calls(child_id, 1)
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="timeout"))
    first_turn.set()
    outcome = await handle.result()

    assert outcome.state == WorkstreamState.TIMEOUT
    assert outcome.output == "Partial: the first half is done."
    assert outcome.iterations == 1
    assert len(harness.llm.requests[child_id]) == 1  # no step after the stop
    messages = await harness.messages(parent_id)
    assert not [m for m in of(messages, M.UPDATE) if m["d"].get("tool") == "word_count"]
    complete = of(messages, M.COMPLETE)[-1]
    assert complete["w"] == "ws-1" and complete["d"]["status"] == "timeout"
    assert complete["m"] == "Workstream ws-1 timeout: Partial: the first half is done."


async def test_temporal_cancel_ends_it_canceled(harness: Harness) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    harness.llm.hold(child_id, 1)  # a step that never ends by itself
    handle = await harness.start_child(parent.id)
    await harness.wait_calls(child_id, 1)
    await cancel_run(handle)
    outcome = await handle.result()

    assert outcome.state == WorkstreamState.CANCELED
    assert outcome.iterations == 1
    messages = await harness.messages(parent.id)
    assert not of(messages, M.COMPLETE)  # the parent reports a forced end


async def test_forced_cancel_after_a_timeout_stop_reports_timeout(harness: Harness) -> None:
    parent = await harness.start_parent()
    child_id = child_workflow_id(parent.id, "ws-1")
    harness.llm.hold(child_id, 1)
    handle = await harness.start_child(parent.id)
    await harness.wait_calls(child_id, 1)
    await handle.signal(CHILD_STOP_SIGNAL, ChildStop(reason="timeout"))
    await cancel_run(handle)  # the parent's grace period ran out
    outcome = await handle.result()

    assert outcome.state == WorkstreamState.TIMEOUT
    assert outcome.output is None


def test_a_long_conversation_keeps_its_opening_and_standing_instructions() -> None:
    instruction = "Constraint (steer s-1): Be brief."
    conversation = [
        *opening("system", "the task"),
        ChatMessage(role="user", content=instruction),
    ]
    for n in range(30):
        conversation += [
            assistant(f"calling {n}", ("calculator", {"expression": f"{n}+1"})),
            ChatMessage(role="tool", content=str(n + 1), tool_call_id="c0", name="calculator"),
        ]
    kept = bounded(conversation, [instruction])

    assert len(kept) <= MAX_CONVERSATION
    assert [m.content for m in kept[:3]] == [
        "system",
        "the task",
        f"{STANDING_HEADER}\n{instruction}",
    ]
    assert kept[3].role == "assistant"  # never a tool result without its call
    assert kept[-1] == conversation[-1]
    assert bounded(kept, [instruction]) == kept  # bounded again: nothing restated twice
