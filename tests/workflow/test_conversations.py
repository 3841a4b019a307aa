"""Talking to a running agent (docs/conversations.md): user messages at the turn boundary,
interactive agents (IDLE, COMPLETE, idle timeout), uploads, continue-as-new while idle.

Time-skipping server, real activities, the offline model (it answers the latest user
message: ``(offline model) You asked: "<text>"`` or ``Answer to "<text>"``).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import orjson
import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from spindle.shared.contracts.runs import (
    COMPLETE_AGENT_UPDATE,
    FILE_UPLOADED_SIGNAL,
    GRAPH_RUN_WORKFLOW,
    USER_MESSAGE_UPDATE,
    CompleteAck,
    CompleteAgent,
    FileUploaded,
    GraphRunInput,
    GraphRunResult,
    RunStatus,
    SignalAck,
    UserInput,
)
from spindle.shared.graphs.structure import parse_graph, validate_structure
from spindle.shared.store.agent_memory import run_memory_base
from spindle.worker.examples import load_example
from tests.workflow.runs import GraphRunner, M, eventually

pytestmark = pytest.mark.workflow


def chat_graph(**params: Any) -> Any:
    graph = parse_graph(
        {
            "name": "chat-test",
            "entry": "chat",
            "nodes": [
                {
                    "id": "chat",
                    "type": "agent",
                    "params": {"tools": ["calculator"], "interactive": True, **params},
                }
            ],
            "edges": [],
        }
    )
    validate_structure(graph)
    return graph


async def send(handle: WorkflowHandle[Any, Any], text: str, **fields: Any) -> SignalAck:
    return await handle.execute_update(
        USER_MESSAGE_UPDATE, UserInput(message=text, **fields), result_type=SignalAck
    )


def follow_ups(conversation: list[dict[str, Any]]) -> list[str]:
    """The user messages after the opening (the node's own prompt)."""
    return [m["content"] for m in conversation[1:] if m["role"] == "user"]


def main(messages: list[dict[str, Any]], kind: M) -> list[dict[str, Any]]:
    return [m for m in messages if m["t"] == kind and not m.get("w")]


async def wait_count(runner: GraphRunner, wf: str, kind: M, count: int) -> list[dict[str, Any]]:
    async def probe() -> list[dict[str, Any]] | None:
        messages = await runner.messages(wf)
        return messages if len(main(messages, kind)) >= count else None

    return await eventually(probe, timeout=20, what=f"{count} x {kind.name} on {wf}")


async def wait_answer(runner: GraphRunner, wf: str, text: str) -> None:
    """Until an ANSWER quotes ``text`` (the offline model quotes the latest message)."""

    async def probe() -> bool:
        return any(f'"{text}"' in m["m"] for m in main(await runner.messages(wf), M.ANSWER))

    await eventually(probe, timeout=20, what=f"the answer to {text!r}")


async def handed_over(handle: WorkflowHandle[Any, Any]) -> bool:
    """The current generation's history is below the threshold (100 events)."""
    described = await handle.describe()
    return described.history_length < 100


async def stored(runner: GraphRunner, wf: str, node: str = "chat") -> list[dict[str, Any]]:
    """The agent's conversation as its memory log holds it (by reference), in order."""
    raw = await runner.bus.redis.hgetall(f"{run_memory_base(wf, wf, node)}:log")
    by_seq = {int(k): orjson.loads(v)["m"] for k, v in raw.items()}
    return [by_seq[i] for i in sorted(by_seq)]


async def start(
    runner: GraphRunner, graph: Any, text: str, **extra: Any
) -> WorkflowHandle[Any, Any]:
    return await runner.client.start_workflow(
        GRAPH_RUN_WORKFLOW,
        GraphRunInput(graph=graph, input={"message": text}, **extra),
        id=f"chat-{uuid.uuid4().hex[:10]}",
        task_queue=runner.task_queue,
        result_type=GraphRunResult,
    )


async def test_interactive_agent_idles_answers_each_message_once_and_completes(
    runner: GraphRunner,
) -> None:
    handle = await start(runner, chat_graph(), "what is 6 * 7")
    await wait_count(runner, handle.id, M.IDLE, 1)
    ack = await send(handle, "hello there", client_message_id="m-1", metadata={"page": "p1"})
    assert ack.status == "accepted"
    again = await send(handle, "hello there", client_message_id="m-1")
    assert "taken already" in again.message
    messages = await wait_count(runner, handle.id, M.IDLE, 2)
    questions = main(messages, M.QUESTION)
    assert [(q["m"], q["d"]["client_message_id"]) for q in questions] == [("hello there", "m-1")]
    assert questions[0]["d"]["metadata"] == {"page": "p1"}
    answers = main(messages, M.ANSWER)
    assert len(answers) == 2 and "hello there" in answers[-1]["m"]
    done = await handle.execute_update(
        COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck
    )
    assert done.node_id == "chat"
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert "hello there" in str(result.output)
    messages = await runner.messages(handle.id)
    completes = [m for m in messages if m["t"] == M.COMPLETE and m.get("w") == "chat"]
    assert len(completes) == 1 and "COMPLETE" in completes[0]["m"]
    # The same conversation went on: one store, the second exchange after the first.
    conversation = await stored(runner, handle.id)
    assert follow_ups(conversation) == ["hello there"]
    assert conversation[-1]["role"] == "assistant"


async def test_messages_during_a_turn_are_taken_after_it_in_order_once_each(
    runner: GraphRunner,
) -> None:
    handle = await start(runner, chat_graph(), "compute 2 + 3")
    # Sent before the first turn has ended: taken at the boundary after it, never inside.
    acks = [await send(handle, f"burst {n}", client_message_id=f"b-{n}") for n in range(5)]
    await send(handle, "burst 2", client_message_id="b-2")  # a retry: taken once
    assert all(a.status == "accepted" for a in acks)

    async def all_taken() -> list[dict[str, Any]] | None:
        conversation = await stored(runner, handle.id)
        return conversation if len(follow_ups(conversation)) >= 5 else None

    await wait_count(runner, handle.id, M.IDLE, 1)
    conversation = await eventually(all_taken, timeout=20, what="the burst stored")
    assert follow_ups(conversation) == [f"burst {n}" for n in range(5)]
    # The first turn ran (and called its tool) before any message joined.
    assert [m["role"] for m in conversation[:3]] == ["user", "assistant", "tool"]
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    assert (await handle.result()).status is RunStatus.COMPLETED


async def test_idle_agent_waits_30_days_then_answers(
    runner: GraphRunner, time_skipping_env: WorkflowEnvironment
) -> None:
    handle = await start(runner, chat_graph(idle_timeout_seconds=30 * 24 * 3600), "hi")
    await wait_count(runner, handle.id, M.IDLE, 1)
    await time_skipping_env.sleep(timedelta(days=29, hours=23))
    await send(handle, "still there?")
    messages = await wait_count(runner, handle.id, M.IDLE, 2)
    assert "still there?" in main(messages, M.ANSWER)[-1]["m"]
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    assert (await handle.result()).status is RunStatus.COMPLETED


async def test_idle_timeout_ends_the_agent_with_its_answer(runner: GraphRunner) -> None:
    handle = await start(runner, chat_graph(idle_timeout_seconds=60), "what is 1 + 1")
    result = await handle.result()  # time skips to the idle timeout
    assert result.status is RunStatus.COMPLETED
    messages = await runner.messages(handle.id)
    ends = [m for m in messages if m["t"] == M.COMPLETE and m.get("w") == "chat"]
    assert len(ends) == 1 and "idle_timeout_seconds" in ends[0]["m"]


async def test_no_agent_listening_is_refused_naming_why(runner: GraphRunner) -> None:
    handle = await start(runner, chat_graph(), "hi")
    await wait_count(runner, handle.id, M.IDLE, 1)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await send(handle, "to nobody", node_id="nope")
    cause = refused.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "NotWaiting"
    assert "agent 'nope' of the main workstream is not listening" in str(cause)
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    await handle.result()
    # A non-interactive graph ends after its answer: COMPLETE of an agent is refused.
    plain = await start(runner, chat_graph(interactive=False), "hi")
    assert (await plain.result()).status is RunStatus.COMPLETED


async def test_upload_is_posted_and_told_with_the_next_message(runner: GraphRunner) -> None:
    handle = await start(runner, chat_graph(), "hi")
    await wait_count(runner, handle.id, M.IDLE, 1)
    await handle.signal(
        FILE_UPLOADED_SIGNAL,
        FileUploaded(name="notes.txt", content_type="text/plain", size=12, path="notes.txt"),
    )
    await wait_count(runner, handle.id, M.SYSTEM, 1)
    await send(handle, "what did I upload?")
    await wait_count(runner, handle.id, M.IDLE, 2)
    conversation = await stored(runner, handle.id)
    told = [m for m in conversation if m["role"] == "system" and "notes.txt" in m["content"]]
    assert len(told) == 1 and "12 bytes" in told[0]["content"]
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    await handle.result()


async def test_continue_as_new_while_idle_and_with_messages_queued_loses_nothing(
    runner: GraphRunner,
) -> None:
    handle = await start(runner, chat_graph(), "hi", continue_as_new_after_events=100)
    texts = [f"message {n}" for n in range(12)]
    latest = runner.client.get_workflow_handle(handle.id)  # the current generation
    await wait_count(runner, handle.id, M.IDLE, 1)
    for n, text in enumerate(texts):
        await send(handle, text, client_message_id=f"c-{n}")
        if n % 3 == 2:
            # Three at once, then the answer to the last of them; once history is long,
            # the idle run continues as new before the next three.
            await wait_answer(runner, handle.id, text)
            await eventually(
                lambda: handed_over(latest), timeout=20, what="a short history while idle"
            )
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED
    assert result.generation >= 2
    conversation = await stored(runner, handle.id)
    assert follow_ups(conversation) == texts  # every message, in order, once, one conversation
    questions = [m["m"] for m in main(await runner.messages(handle.id), M.QUESTION)]
    assert questions == texts
    assert texts[-1] in str(result.output)


async def test_a_burst_of_updates_in_flight_together_is_taken_once_each(
    runner: GraphRunner,
) -> None:
    handle = await start(runner, chat_graph(), "hi")
    await wait_count(runner, handle.id, M.IDLE, 1)
    await asyncio.gather(*(send(handle, f"p {n}", client_message_id=f"p-{n}") for n in range(5)))
    await wait_count(runner, handle.id, M.QUESTION, 5)

    async def taken() -> list[str] | None:
        users = follow_ups(await stored(runner, handle.id))
        return users if len(users) >= 5 else None

    users = await eventually(taken, timeout=20, what="five messages stored")
    assert sorted(users) == [f"p {n}" for n in range(5)] and len(users) == 5
    questions = [m["m"] for m in main(await runner.messages(handle.id), M.QUESTION)]
    assert questions == users  # echoed in the order the agent takes them
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    await handle.result()


async def test_the_chat_example_holds_a_conversation(runner: GraphRunner) -> None:
    handle = await runner.start(load_example("chat"), {"message": "What is 17 * 3?"})
    await wait_count(runner, handle.id, M.IDLE, 1)
    for n, text in enumerate(["What is Temporal?", "and 2 + 2", "thanks"]):
        await send(handle, text, client_message_id=f"x-{n}")
        await wait_count(runner, handle.id, M.IDLE, n + 2)
    answers = [m["m"] for m in main(await runner.messages(handle.id), M.ANSWER)]
    # Each message answered (children the offline model launched may add answers).
    for text in ["What is 17 * 3?", "What is Temporal?", "and 2 + 2", "thanks"]:
        assert any(f'"{text}"' in a for a in answers), text
    assert any("17 * 3 = 51" in a for a in answers) and any("2 + 2 = 4" in a for a in answers)
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED


async def test_an_exchange_that_calls_tools_first_posts_its_plan(runner: GraphRunner) -> None:
    handle = await start(runner, chat_graph(), "what is 6 * 7")
    await wait_count(runner, handle.id, M.IDLE, 1)
    await send(handle, "hello")  # no tool: no plan
    await wait_count(runner, handle.id, M.IDLE, 2)
    await send(handle, "and 2 + 3")
    messages = await wait_count(runner, handle.id, M.IDLE, 3)
    plans = main(messages, M.PLAN)
    assert [p["d"]["tasks"] for p in plans] == [
        [
            {
                "name": "calculator",
                "arguments": "expression=6 * 7",
                "title": "calculator(expression=6 * 7)",
            }
        ],
        [
            {
                "name": "calculator",
                "arguments": "expression=2 + 3",
                "title": "calculator(expression=2 + 3)",
            }
        ],
    ]
    assert plans[0]["m"] == "Plan: 1 tool call: calculator"
    assert [p["d"]["turn"] for p in plans] == [1, 4]  # each exchange's first turn
    # On the stream: the turn's THOUGHT, its PLAN, then the tool at work.
    kinds = [m["t"] for m in messages if m["t"] in (M.THOUGHT, M.PLAN, M.UPDATE)]
    first = kinds.index(M.PLAN)
    assert kinds[first - 1] == M.THOUGHT and kinds[first + 1] == M.UPDATE
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    await handle.result()
    # An agent nobody talks to plans nothing (its run records what it always did).
    plain = await start(runner, chat_graph(interactive=None), "what is 1 + 1")
    assert (await plain.result()).status is RunStatus.COMPLETED
    assert not main(await runner.messages(plain.id), M.PLAN)


async def generations(
    runner: GraphRunner, workflow_id: str, first_run_id: str
) -> list[tuple[list[tuple[int, str | None]], GraphRunInput | None]]:
    """Per generation, in order: the ``user_message`` updates it accepted (the history
    length then, the message's ``client_message_id``) and the input it continued as new
    with (None for the last generation)."""
    chain: list[tuple[list[tuple[int, str | None]], GraphRunInput | None]] = []
    converter = runner.client.data_converter
    run_id: str | None = first_run_id
    while run_id:
        run = runner.client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await run.fetch_history()
        accepted: list[tuple[int, str | None]] = []
        carried: GraphRunInput | None = None
        run_id = None
        for event in history.events:
            if event.HasField("workflow_execution_update_accepted_event_attributes"):
                request = event.workflow_execution_update_accepted_event_attributes
                update = request.accepted_request.input
                if update.name == USER_MESSAGE_UPDATE:
                    [message] = await converter.decode(list(update.args.payloads), [UserInput])
                    accepted.append((event.event_id, message.client_message_id))
            elif event.HasField("workflow_execution_continued_as_new_event_attributes"):
                attrs = event.workflow_execution_continued_as_new_event_attributes
                [carried] = await converter.decode(list(attrs.input.payloads), [GraphRunInput])
                run_id = attrs.new_execution_run_id
        chain.append((accepted, carried))
    return chain


async def test_messages_queued_when_a_handover_is_due_are_each_taken_and_answered_once(
    runner: GraphRunner,
) -> None:
    """Issue 27: continue-as-new while a message is queued. Sent back to back, without
    waiting for answers, messages land while the agent works and while its run's history
    is past ``continue_as_new_after_events``: a handover is due with messages queued."""
    threshold = 100
    handle = await start(runner, chat_graph(), "hi", continue_as_new_after_events=threshold)
    await wait_count(runner, handle.id, M.IDLE, 1)
    texts = [f"queued {n}" for n in range(40)]
    for n, text in enumerate(texts):
        ack = await send(handle, text, client_message_id=f"q-{n}")
        assert ack.status == "accepted"

    async def all_taken() -> list[dict[str, Any]] | None:
        conversation = await stored(runner, handle.id)
        return conversation if len(follow_ups(conversation)) >= len(texts) else None

    await eventually(all_taken, timeout=30, what="every queued message stored")
    await wait_answer(runner, handle.id, texts[-1])
    latest = runner.client.get_workflow_handle(handle.id)  # the current generation
    await eventually(lambda: handed_over(latest), timeout=20, what="a handover once idle")
    # A client's retry after the handover is known (the carried ids): taken once.
    again = await send(handle, texts[20], client_message_id="q-20")
    assert "taken already" in again.message
    await handle.execute_update(COMPLETE_AGENT_UPDATE, CompleteAgent(), result_type=CompleteAck)
    result = await handle.result()
    assert result.status is RunStatus.COMPLETED and result.generation >= 2

    chain = await generations(runner, handle.id, handle.first_execution_run_id or "")
    # The case itself, from the recorded history: a generation that continued as new
    # accepted messages once its history was past the threshold (a handover was due
    # while they were queued), and handed over its idle agent only after taking them
    # (an idle agent wakes in the workflow task that takes a message, and the handover
    # waits for that message's QUESTION post: docs/conversations.md).
    due = [
        (accepted, carried)
        for accepted, carried in chain
        if carried is not None and any(event_id >= threshold for event_id, _ in accepted)
    ]
    assert due, [accepted for accepted, _ in chain]
    for accepted, run_input in due:
        assert run_input is not None and run_input.carried is not None
        agent = run_input.carried.agents["chat"]  # carried idle, by reference
        assert {cmid for _, cmid in accepted} <= set(agent.seen)
        assert {m.client_message_id for m in agent.inbox} <= set(agent.seen)
    # Every message: echoed once, stored once, in order, in one conversation.
    conversation = await stored(runner, handle.id)
    assert follow_ups(conversation) == texts
    questions = [m["m"] for m in main(await runner.messages(handle.id), M.QUESTION)]
    assert questions == texts
    # Answered once: each ANSWER quotes the latest message it took, never one twice.
    answers = [m["m"] for m in main(await runner.messages(handle.id), M.ANSWER)]
    quoted = [next(n for n, t in enumerate(texts) if f'"{t}"' in a) for a in answers[1:]]
    assert quoted == sorted(set(quoted)) and quoted[-1] == len(texts) - 1
    assert texts[-1] in str(result.output)
