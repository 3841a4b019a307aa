"""Seed 003 task events of one executed tree, kept in a Redis stream.

Whoever changes a task of a running tree (the worker's node and finish
activities, the gateway's ``tasks.execute`` and ``tasks.cancel``) appends the
event here right after the task document was written. The gateway's SSE
response of a streaming ``tasks.execute`` subscribes to the tree's live
channel through the process's shared ``SubscriptionHub``, then reads the stored
events from the first, so it neither misses an event published before it
started reading nor sends one twice (``spindle.gateway.streams.follower``, as
for a run's messages); push notifications are queued at the same time
(``spindle.shared.tasks.push``).

Keys (per root task; one hash tag keeps them on one Redis Cluster slot)::

    spindle:{task-events:<root>}:tasklog   STREAM of {"e": <event JSON>}, ids <seq>-1
    spindle:{task-events:<root>}:taskseq   INT last sequence number
    spindle:{task-events:<root>}:live      pub/sub channel, ``<seq> <ends> <json>``
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import orjson
from pydantic import BaseModel

from spindle.shared.bus.message_bus import StoredMessage, live_channel, stream_key
from spindle.shared.platform.redis_connect import publish_command

if TYPE_CHECKING:
    from spindle.shared.platform.redis_connect import RedisClient

TaskEventType = Literal[
    "task_status_update",
    "task_progress_update",
    "task_completed",
    "task_failed",
    "task_cancelled",
]
EVENT_OF_STATUS: dict[str, TaskEventType] = {
    "completed": "task_completed",
    "failed": "task_failed",
    "cancelled": "task_cancelled",
}
TERMINAL_EVENTS = frozenset(EVENT_OF_STATUS.values())
LOG_MAXLEN = 10_000
READ_PAGE = 500
LOG_TTL_SECONDS = 7 * 24 * 3600


class TaskEventData(BaseModel):
    """The ``data`` of a seed 003 streaming event."""

    protocol: Literal["a2a"] = "a2a"
    task_id: str
    status: str
    progress: float
    root_task_id: str
    result: Any = None
    error: str | None = None


class TaskEvent(BaseModel):
    """One streaming event: ``{"event": <type>, "data": {...}}``."""

    event: TaskEventType
    data: TaskEventData

    @property
    def ends_tree(self) -> bool:
        """True for the root task's terminal event: nothing follows it."""
        return self.data.task_id == self.data.root_task_id and self.event in TERMINAL_EVENTS

    def sse(self, event_id: str | None = None) -> bytes:
        """The event as an SSE frame (named event, JSON data)."""
        head = f"id: {event_id}\n" if event_id else ""
        data = orjson.dumps(self.data.model_dump(mode="json", exclude_none=True)).decode()
        return f"{head}event: {self.event}\ndata: {data}\n\n".encode()


def status_event(
    *,
    task_id: str,
    root_task_id: str,
    status: str,
    progress: float,
    result: Any = None,
    error: str | None = None,
) -> TaskEvent:
    """The event announcing a task's new status (terminal statuses have their own type)."""
    return TaskEvent(
        event=EVENT_OF_STATUS.get(status, "task_status_update"),
        data=TaskEventData(
            task_id=task_id,
            status=status,
            progress=progress,
            root_task_id=root_task_id,
            result=result,
            error=error,
        ),
    )


def progress_event(*, task_id: str, root_task_id: str, status: str, progress: float) -> TaskEvent:
    return TaskEvent(
        event="task_progress_update",
        data=TaskEventData(
            task_id=task_id, status=status, progress=progress, root_task_id=root_task_id
        ),
    )


def events_stream_id(root_task_id: str) -> str:
    """The tree's pseudo stream id: its keys and live channel share its hash tag."""
    return f"task-events:{root_task_id}"


def log_key(root_task_id: str) -> str:
    return stream_key(events_stream_id(root_task_id), "tasklog")


def seq_key(root_task_id: str) -> str:
    return stream_key(events_stream_id(root_task_id), "taskseq")


# KEYS: log, seq. ARGV: event JSON, ends '0'|'1', maxlen, ttl s, live channel,
# PUBLISH or SPUBLISH (a Redis Cluster: the channel shares the keys' slot).
_APPEND = """
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], seq .. '-1', 'e', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[4])
redis.call(ARGV[6], ARGV[5], seq .. ' ' .. ARGV[2] .. ' ' .. ARGV[1])
return seq
"""


class TaskEventLog:
    """Append and read the events of executed trees.

    Each event gets the tree's next sequence number, is appended to the tree's
    Redis stream (entry id ``<seq>-1``) and published on the tree's live
    channel as ``<seq> <ends> <json>`` (the bus's live format), in one atomic
    script: a reader that subscribes through the gateway's ``SubscriptionHub``
    first and then reads the backlog misses nothing (docs/design.md §9).

    Args:
        redis: the bus's Redis client.
    """

    def __init__(self, redis: RedisClient) -> None:
        self.redis = redis
        self._publish = publish_command(redis)

    async def append(self, event: TaskEvent) -> int:
        """Append and publish ``event``; returns its sequence number in the tree."""
        root = event.data.root_task_id
        seq = await self.redis.eval(  # type: ignore[misc]
            _APPEND,
            2,
            log_key(root),
            seq_key(root),
            orjson.dumps(event.model_dump(mode="json")),
            "1" if event.ends_tree else "0",
            str(LOG_MAXLEN),
            str(LOG_TTL_SECONDS),
            live_channel(events_stream_id(root)),
            self._publish,
        )
        return int(seq)

    async def since(
        self, root_task_id: str, after_seq: int = 0, *, count: int = 500
    ) -> list[tuple[int, TaskEvent]]:
        """Stored events with a sequence number above ``after_seq``, oldest first (one page)."""
        page = await self.stored(root_task_id, after_seq, count=count)
        return [(item.seq, TaskEvent.model_validate_json(item.raw)) for item in page]

    async def stored(
        self, root_task_id: str, after_seq: int = 0, *, count: int | None = None
    ) -> list[StoredMessage]:
        """Stored events above ``after_seq`` as their seq and stored JSON, oldest first.

        Args:
            count: at most this many; None reads them all (in pages of ``READ_PAGE``).

        The ``ts`` of each is 0: task events carry no timestamp of their own.
        """
        out: list[StoredMessage] = []
        while count is None or len(out) < count:
            page = READ_PAGE if count is None else min(READ_PAGE, count - len(out))
            reply: Any = await self.redis.xrange(
                log_key(root_task_id), min=f"{after_seq + 1}-0", max="+", count=page
            )
            for entry_id, fields in reply:
                ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                raw = fields.get(b"e") or fields.get("e")
                after_seq = int(ident.split("-", 1)[0])
                out.append(
                    StoredMessage(after_seq, 0, raw if isinstance(raw, bytes) else raw.encode())
                )
            if len(reply) < page:
                break
        return out

    async def last_seq(self, root_task_id: str) -> int:
        """The tree's last sequence number, 0 before its first event."""
        value = await self.redis.get(seq_key(root_task_id))
        return int(value) if value is not None else 0


def stored_event_ends_tree(raw: bytes) -> bool:
    """``TaskEvent.ends_tree`` of a stored event, read without validating it."""
    event = orjson.loads(raw)
    data = event.get("data") or {}
    return event.get("event") in TERMINAL_EVENTS and data.get("task_id") == data.get("root_task_id")
