"""Following one run's messages for the A2A bridge (no gap, no duplicate).

The same order of operations as ``spindle.gateway.streams.sse`` (docs/design.md §9): subscribe
to the run's live channel through the process's shared ``SubscriptionHub``
first, then read the stored messages after the cursor, then take live events,
dropping every seq already seen. A gap in the live feed is filled from the
store; a lost feed resumes from the store, so a follower never misses the
message that matters (REQUEST_INPUT, COMPLETE, TERMINATED).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from types import TracebackType

from spindle.gateway.streams.history import stored_messages
from spindle.shared.bus.hub import Subscription, SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import MessageBus
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.store.archive import RunArchive

log = logging.getLogger(__name__)


class RunFollower:
    """Messages of one run with ``seq > after_seq``, stored first, then live.

    Use as an async context manager: entering subscribes (so nothing posted
    afterwards can be missed); iterate ``messages()`` to read.
    """

    def __init__(
        self,
        workflow_id: str,
        *,
        hub: SubscriptionHub,
        bus: MessageBus,
        archive: RunArchive | None,
        after_seq: int = 0,
    ) -> None:
        self.workflow_id = workflow_id
        self._hub = hub
        self._bus = bus
        self._archive = archive
        self.last_seq = after_seq
        self._stack = contextlib.AsyncExitStack()
        self._sub: Subscription | None = None

    async def __aenter__(self) -> RunFollower:
        self._sub = await self._stack.enter_async_context(self._hub.subscribe(self.workflow_id))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stack.aclose()

    async def current_seq(self) -> int:
        """The run's last posted seq (after subscribing: a cursor that loses nothing)."""
        return await self._bus.last_seq(self.workflow_id)

    async def messages(self) -> AsyncIterator[CompactMessage]:
        """Stored messages after the cursor, then live ones, until the conversation ends."""
        assert self._sub is not None, "enter the follower first"
        async for message in self._stored():
            yield message
            if message.ends_conversation:
                return
        while True:
            try:
                event = await self._sub.get()
            except SubscriptionLost as exc:
                # Nothing more arrives live: read the store and re-subscribe.
                log.info("a2a follow of %s: live feed lost (%s)", self.workflow_id, exc)
                await self._stack.aclose()
                self._stack = contextlib.AsyncExitStack()
                self._sub = await self._stack.enter_async_context(
                    self._hub.subscribe(self.workflow_id)
                )
                async for message in self._stored():
                    yield message
                    if message.ends_conversation:
                        return
                continue
            if event.seq <= self.last_seq:
                continue
            if event.seq > self.last_seq + 1:
                async for message in self._stored():  # fill the gap
                    yield message
                    if message.ends_conversation:
                        return
                continue
            self.last_seq = event.seq
            message = CompactMessage.model_validate_json(event.raw)
            yield message
            if message.ends_conversation or event.ends:
                return

    async def _stored(self) -> AsyncIterator[CompactMessage]:
        stored = await stored_messages(
            self.workflow_id, bus=self._bus, archive=self._archive, after_seq=self.last_seq
        )
        for item in stored:
            if item.seq <= self.last_seq:
                continue
            self.last_seq = item.seq
            yield CompactMessage.model_validate_json(item.raw)
