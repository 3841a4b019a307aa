"""The ``chat`` example through the Python SDK: a long conversation, message after
message (issue 27, Tests: "the chat example through the SDK for 200 messages").

Each message is sent with ``send_message`` once the agent is IDLE waiting for the
user; the SDK's stream (history, then SSE) is read until that IDLE comes back. The
offline model quotes the message it answers, and the example's agent also launches
a workstream per message (its ``launch_workstream`` takes any text): an answer given
after that child's report quotes the same message, and the agent waits for the user
again only once per message.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import pytest

from spindle.client import (
    AgentMessageType,
    AsyncSpindleClient,
    ClientConfig,
    ConflictError,
    SpindleClient,
    StreamedMessage,
)
from tests.e2e.conftest import Caller, SpindleStack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

T = AgentMessageType
MESSAGES = int(os.environ.get("SPINDLE_TEST_CHAT_MESSAGES", "200"))
WAIT = 60.0


def waits_for_the_user(item: StreamedMessage) -> bool:
    """IDLE of the main workstream waiting for a message (not for a child)."""
    return (
        item.workstream == "main"
        and item.type is T.IDLE
        and not (item.details or {}).get("waiting_for")
    )


async def until_user_turn(messages: AsyncIterator[StreamedMessage]) -> list[StreamedMessage]:
    """The main workstream's messages up to the IDLE that waits for the user."""
    seen: list[StreamedMessage] = []
    async with asyncio.timeout(WAIT):
        async for item in messages:
            if item.workstream == "main":
                seen.append(item)
            if waits_for_the_user(item):
                return seen
    raise AssertionError(f"the stream ended before the agent waited: {[m.text for m in seen]}")


def quoted(text: str, item: StreamedMessage) -> bool:
    return f'"{text}"' in item.text


@pytest.fixture
def config(stack: SpindleStack, callers: dict[str, Caller], examples: list[str]) -> ClientConfig:
    return ClientConfig(base_url=stack.base_url, api_key=callers["alice"].key)


async def test_the_chat_example_answers_each_of_200_messages_once_in_order(
    config: ClientConfig,
) -> None:
    texts = [f"question number {n}: what is {n} + 1" for n in range(MESSAGES)]
    async with AsyncSpindleClient(config) as client:
        run = await client.start_run("chat", input={"message": "hello"})
        stream = await client.stream(run)
        messages = stream.messages()
        opening = await until_user_turn(messages)
        assert any(m.type is T.ANSWER and quoted("hello", m) for m in opening)
        for n, text in enumerate(texts):
            ack = await client.send_message(
                run, text, client_message_id=f"sdk-{n}", metadata={"n": n}
            )
            assert ack.status == "accepted"
            exchange = await until_user_turn(messages)
            questions = [m for m in exchange if m.type is T.QUESTION]
            answers = [m for m in exchange if m.type is T.ANSWER]
            assert [(q.text, q.details["client_message_id"]) for q in questions] == [
                (text, f"sdk-{n}")
            ]
            assert answers, f"message {n} got no answer"
            # Every answer of the exchange answers this message (none is late or
            # early), and its first says its sum: it was answered, once, in order.
            assert all(quoted(text, a) for a in answers), [a.text for a in answers]
            assert f"{n} + 1 = {n + 1}" in answers[0].text
            assert sum(waits_for_the_user(m) for m in exchange) == 1

        done = await client.complete(run)
        assert done.node_id == "assistant"
        async with asyncio.timeout(WAIT):
            rest = [m async for m in messages]
        assert rest[-1].ends_conversation and rest[-1].type is T.COMPLETE
        info = await client.get_run(run)
        assert info.status == "completed"
        with pytest.raises(ConflictError):
            await client.send_message(run, "too late")
    all_questions = [
        m for m in await client_history(config, run.workflow_id) if m.type is T.QUESTION
    ]
    assert [q.text for q in all_questions if q.workstream == "main"] == texts


async def client_history(config: ClientConfig, workflow_id: str) -> list[StreamedMessage]:
    async with AsyncSpindleClient(config) as client:
        return await client.history(workflow_id)


def sync_chat(config: ClientConfig) -> tuple[list[str], str]:
    """A two-message chat with the sync client: the answers, the run's status."""
    with SpindleClient(config) as client:
        run = client.start_run("chat", input={"message": "what is 2 + 2"})
        answers: list[str] = []
        sent = False
        for item in client.stream(run):
            if item.workstream != "main":
                continue
            if item.type is T.ANSWER:
                answers.append(item.text)
            if waits_for_the_user(item):
                if not sent:
                    client.send_message(run, "and 3 * 3", client_message_id="sync-1")
                    sent = True
                else:
                    assert client.complete(run).node_id == "assistant"
        return answers, client.get_run(run).status


async def test_the_sync_client_sends_messages_and_completes(config: ClientConfig) -> None:
    answers, status = await asyncio.to_thread(sync_chat, config)
    assert any("2 + 2 = 4" in a for a in answers)
    assert any("3 * 3 = 9" in a for a in answers)
    assert status == "completed"
