"""The SDK's stream survives a gateway restart: a gateway process of this test's
own is SIGKILLed mid-stream and started again on the same port; the client
reconnects with backoff, resumes with ``Last-Event-ID`` and yields every
message of the run once, in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from spindle.client import (
    AgentMessageType,
    AsyncSpindleClient,
    BackoffPolicy,
    ClientConfig,
    StreamedMessage,
)
from spindle.dev.processes import ManagedProcess, free_port
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.platform.settings import Settings
from tests.e2e.conftest import Caller, SpindleStack, start_gateway

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

T = AgentMessageType


@pytest.fixture
def own_gateway(
    stack: SpindleStack, e2e_settings: Settings
) -> Iterator[tuple[ManagedProcess, str]]:
    """A second gateway process on the e2e stack's servers, for this test to kill."""
    settings = e2e_settings.model_copy(update={"gateway_port": free_port()})
    logs = stack.gateway.log_path.parent
    process = start_gateway(settings, "sdk restart gateway", logs)
    try:
        yield process, f"http://127.0.0.1:{settings.gateway_port}"
    finally:
        process.stop()


@pytest.fixture
async def bus(e2e_settings: Settings) -> AsyncIterator[MessageBus]:
    made = MessageBus.from_settings(e2e_settings)
    yield made
    await made.close()


async def test_stream_resumes_after_the_gateway_restarts_mid_stream(
    own_gateway: tuple[ManagedProcess, str],
    stack: SpindleStack,
    callers: dict[str, Caller],
    examples: list[str],
    bus: MessageBus,
) -> None:
    gateway, url = own_gateway
    key = callers["alice"].key
    # Short waits, so the test spends little time backing off; the policy's
    # shape (doubling, jitter, attempt limit) is the production one.
    watcher_config = ClientConfig(
        base_url=url, api_key=key, backoff=BackoffPolicy(base=0.2, cap=2.0, max_attempts=30)
    )
    async with (
        AsyncSpindleClient(watcher_config) as watcher,
        AsyncSpindleClient(ClientConfig(base_url=stack.base_url, api_key=key)) as control,
    ):
        run = await control.start_run("approval-flow", input={"topic": "gateway restart"})
        stream = await watcher.stream(run)
        seen: list[StreamedMessage] = []
        async with asyncio.timeout(90):
            async for item in stream:
                seen.append(item)
                if item.type is T.REQUEST_INPUT:
                    gateway.kill()
                    gateway.start(wait=False)
                    # The answer's messages are posted while the watcher is cut off.
                    await control.send_input(run, data={"decision": "approve"})

    assert stream.connections >= 2 and stream.reconnects.delays, "it reconnected"
    stored = await bus.history(run.workflow_id)
    assert [m.ts for m in seen] == [m.ts for m in stored], "every message once, in order"
    kinds = [m.type for m in seen]
    assert kinds.count(T.QUESTION) == 1 and kinds[-1] is T.COMPLETE
    live = [m for m in seen if m.seq is not None]
    assert [m.seq for m in live] == [m.seq for m in stored if m.ts in {x.ts for x in live}]
