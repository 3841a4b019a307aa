"""A run's message list as a ``FollowSource``: what a follower of a run reads.

The backlog is ``stored_messages`` (Redis first, older ones from the Mongo
archive, so a run whose Redis list was trimmed or expired still resumes from
any seq: a cold resume). The end is the seq Redis recorded when the main
workstream's COMPLETE / TERMINATED was posted; when Redis forgot the stream
the last archived message says it. Timestamps are read from the stored bytes'
``{"ts":<n>,`` prefix, never by parsing the message. A resume cursor is checked
against what is kept (``check_cursor``, ``spindle.gateway.streams.cursor``): a
cursor older than the oldest message kept, or beyond the run's end, is an
error, never a silent jump.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence

from spindle.gateway.streams import cursor as cursors
from spindle.gateway.streams.history import stored_messages
from spindle.shared.bus.message_bus import MessageBus, StoredMessage, stored_ts
from spindle.shared.contracts.messages import CompactMessage
from spindle.shared.store.archive import RunArchive

BacklogReader = Callable[[int, int | None], Awaitable[list[StoredMessage]]]
"""``(after_seq, since_ts) -> stored messages`` of one run, in seq order."""


class RunMessages:
    """The messages of one run (its stream id is its workflow id).

    Args:
        stream_id: the run's stream.
        bus: where the run's sequence counter and end live.
        read_backlog: the stored messages after a cursor (see ``store_reader``).
        archive: the archive ``read_backlog`` reads older messages from (None:
            Redis only); ``check_cursor`` asks it for a run Redis forgot.
    """

    def __init__(
        self,
        stream_id: str,
        *,
        bus: MessageBus,
        read_backlog: BacklogReader,
        archive: RunArchive | None = None,
    ) -> None:
        self._stream_id = stream_id
        self._bus = bus
        self._read_backlog = read_backlog
        self._archive = archive
        self._archived_end: int | None = None

    @classmethod
    def of(cls, stream_id: str, *, bus: MessageBus, archive: RunArchive | None) -> RunMessages:
        """A run's messages from Redis and, when ``archive`` is given, the archive."""
        reader = store_reader(stream_id, bus, archive)
        return cls(stream_id, bus=bus, read_backlog=reader, archive=archive)

    @property
    def stream_id(self) -> str:
        return self._stream_id

    async def read(self, after_seq: int, since_ts: int | None) -> list[StoredMessage]:
        return await self._read_backlog(after_seq, since_ts)

    async def last_seq(self) -> int:
        return await self._bus.last_seq(self._stream_id)

    async def end_seq(self, read: Sequence[StoredMessage]) -> int | None:
        end = await self._bus.end_seq(self._stream_id)
        if end is None and read and _ends_conversation(read[-1].raw):
            end = read[-1].seq  # from the archive: Redis forgot the stream
        if end is None:
            end = self._archived_end
        return end

    def newer_than(self, raw: bytes, since_ts: int) -> bool:
        return stored_ts(raw) > since_ts

    async def check_cursor(self, after_seq: int, read: Sequence[StoredMessage]) -> None:
        """Raise unless ``read`` serves the cursor whole (``cursor.check_cursor``).

        Raises:
            CursorExpired: the messages right after ``after_seq`` are no longer kept.
            CursorBeyondEnd: the run never reached ``after_seq``.
        """
        await cursors.check_cursor(
            self._stream_id, after_seq, read, bus=self._bus, archive=self._archive
        )
        if read or after_seq == 0 or self._archive is None:
            return
        if await self._bus.end_seq(self._stream_id) is not None:
            return
        # Nothing after the cursor and Redis forgot the run: if the archived message
        # at the cursor ended it, the follow is over (it must not wait for more).
        with contextlib.suppress(Exception):  # the archive is down: wait as before
            at = await self._archive.messages(self._stream_id, after_seq=after_seq - 1, limit=1)
            if at and at[0].seq == after_seq and _ends_conversation(at[0].raw):
                self._archived_end = after_seq


def store_reader(stream_id: str, bus: MessageBus, archive: RunArchive | None) -> BacklogReader:
    """Reads a run's stored messages: Redis, then the archive for older ones (if given)."""

    async def read(after_seq: int, since_ts: int | None) -> list[StoredMessage]:
        return await stored_messages(
            stream_id, bus=bus, archive=archive, after_seq=after_seq, since_ts=since_ts
        )

    return read


def _ends_conversation(raw: bytes) -> bool:
    try:
        return CompactMessage.model_validate_json(raw).ends_conversation
    except ValueError:
        return False
