"""What a subscriber of the ``SubscriptionHub`` holds: a bounded queue of one
stream's live events, fed by the hub's reader with ``put_nowait`` (a slow
consumer never holds up the others: it overflows and is told to resume from
the backlog)."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any

from spindle.shared.bus.message_bus import LiveEvent

log = logging.getLogger(__name__)


class SubscriptionLost(Exception):
    """The live feed of a subscription broke (connection dropped, queue overflowed,
    hub stopped). Nothing more will arrive: resume from the backlog by seq."""


class Subscription:
    """One subscriber's view of a stream's live channel (a single consumer task)."""

    def __init__(self, stream_id: str, maxsize: int) -> None:
        self.stream_id = stream_id
        self._events: deque[LiveEvent] = deque()
        self._maxsize = maxsize
        self._waiter: asyncio.Future[None] | None = None
        self._lost: str | None = None
        self._poked = False
        self._channel: Any = None  # the hub's bookkeeping of the channel
        self.taker: Callable[[LiveEvent], bool] | None = None
        """While set, the hub offers it each event first, when nothing is queued.

        It returns True when it has taken the event (delivered it itself, in
        order), False to have it queued as usual. It runs in the hub's reader,
        once per subscriber per event: it must not wait, and it should be
        cheap. The SSE stream writes live frames this way rather than waking
        its task for each one (docs/streaming/gap-free.md#what-a-live-message-costs-a-gateway).
        """

    @property
    def lost(self) -> str | None:
        """Why the subscription was lost, or None while it is live."""
        return self._lost

    def pending(self) -> int:
        """Events received and not yet taken."""
        return len(self._events)

    async def get(self) -> LiveEvent:
        """The next live event, in publish order.

        Raises:
            SubscriptionLost: the feed broke; events may have been missed.
        """
        while (event := await self.get_or_poked()) is None:
            pass  # pokes are for get_or_poked's callers: ignored here
        return event

    async def get_or_poked(self) -> LiveEvent | None:
        """Like ``get``, but returns None when ``poke()`` was called with nothing queued.

        This lets a consumer wait for "an event or a tick" without a timer per
        wait: a follower's keep-alive tick pokes, instead of each ``get`` arming
        (and cancelling) a timeout, which under fan-out cost as much CPU as
        writing the event to the socket.

        Raises:
            SubscriptionLost: the feed broke; events may have been missed.
        """
        # One frame between the consumer and its future: under fan-out each
        # frame is paid once per viewer per message.
        while not self._events:
            if self._lost is not None:
                raise SubscriptionLost(self._lost)
            if self._poked:
                self._poked = False
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._lost is not None:
            raise SubscriptionLost(self._lost)
        return self._events.popleft()

    def poke(self) -> None:
        """Wake the consumer waiting in ``get_or_poked`` (it returns None if nothing is queued)."""
        self._poked = True
        self._wake()

    def get_nowait(self) -> LiveEvent | None:
        """The next event if one is queued, else None.

        Raises:
            SubscriptionLost: the feed broke.
        """
        if self._lost is not None:
            raise SubscriptionLost(self._lost)
        return self._events.popleft() if self._events else None

    def __aiter__(self) -> AsyncIterator[LiveEvent]:
        return self

    async def __anext__(self) -> LiveEvent:
        return await self.get()

    def _deliver(self, event: LiveEvent) -> bool:
        if self._lost is not None:
            return False
        taker = self.taker
        if taker is not None and not self._events:
            try:
                if taker(event):
                    return True
            except Exception:  # one subscriber's fault must not stop the hub's reader
                log.exception("subscription to %s: its taker failed; queueing", self.stream_id)
                self.taker = None
        if len(self._events) >= self._maxsize:
            self._lose(f"live queue overflowed ({self._maxsize} events): consumer too slow")
            return False
        self._events.append(event)
        self._wake()
        return True

    def _lose(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
            self._events.clear()
            self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


__all__ = ["Subscription", "SubscriptionLost"]
