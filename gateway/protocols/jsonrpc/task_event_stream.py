"""The SSE answer of a streaming ``tasks.execute``: a task tree's events, from its first.

The tree's events live in a Redis stream (``spindle.shared.tasks.events``),
not in a run's message list, but they have what a ``StreamFollower`` needs: a
sequence number per event, a live channel in the bus's ``<seq> <ends> <json>``
format published in the same script as the append, and an end (the root
task's ``task_completed`` / ``task_failed`` / ``task_cancelled``). So
``TaskEvents`` is a ``FollowSource`` and the follower keeps the invariant
(docs/streaming/gap-free.md); this module only frames: named SSE events
(``id: <seq>``, ``event: <type>``, ``data: <task data>``) and keep-alive comments.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from redis.exceptions import RedisError

from spindle.gateway.streams.follower import StreamFollower
from spindle.shared.bus.hub import SubscriptionHub, SubscriptionLost
from spindle.shared.bus.message_bus import StoredMessage
from spindle.shared.tasks.events import (
    TaskEvent,
    TaskEventLog,
    events_stream_id,
    stored_event_ends_tree,
)

KEEPALIVE = b": keep-alive\n\n"


class TaskEvents:
    """The events of one executed task tree, as a ``FollowSource``.

    Args:
        log: the task event log.
        root_task_id: the tree's root task.
    """

    def __init__(self, log: TaskEventLog, root_task_id: str) -> None:
        self._log = log
        self._root = root_task_id
        self._stream_id = events_stream_id(root_task_id)

    @property
    def stream_id(self) -> str:
        return self._stream_id

    async def read(self, after_seq: int, since_ts: int | None) -> list[StoredMessage]:
        """Every stored event after ``after_seq`` (events have no ``ts``: ``since_ts`` is moot)."""
        return await self._log.stored(self._root, after_seq)

    async def last_seq(self) -> int:
        return await self._log.last_seq(self._root)

    async def end_seq(self, read: Sequence[StoredMessage]) -> int | None:
        """The root's terminal event among ``read`` (the log records no end of its own)."""
        for item in read:
            if stored_event_ends_tree(item.raw):
                return item.seq
        return None

    def newer_than(self, raw: bytes, since_ts: int) -> bool:
        return True


async def task_event_frames(
    hub: SubscriptionHub, log: TaskEventLog, root_id: str, keepalive: float
) -> AsyncIterator[bytes]:
    """The tree's events as SSE frames, from its first, until the root's end.

    A broken live feed or an unreadable log ends the response: SSE cannot
    report an error once it started, and the client reads the tree's state
    with ``tasks.get``.
    """
    follower = StreamFollower(TaskEvents(log, root_id), hub=hub, idle_seconds=keepalive)
    try:
        async with follower, contextlib.aclosing(follower.batches()) as batches:
            async for batch in batches:
                if not batch:
                    yield KEEPALIVE
                for item in batch:
                    yield TaskEvent.model_validate_json(item.raw).sse(str(item.seq))
    except (SubscriptionLost, RedisError):
        return
