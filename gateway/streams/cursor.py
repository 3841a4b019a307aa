"""One cursor for every protocol: a message's ``seq``, and what happens when it cannot be served.

A client resumes a run's stream after the last ``seq`` it saw, on SSE
(``Last-Event-ID``), A2A (``A2A-Last-Event-ID``), AG-UI (its event id
``<seq>.<k>``) and MCP task streams alike (docs/streaming/gap-free.md). The
follower reads what comes after it from Redis and the archive; this module
decides, before anything is handed out, whether that read can be served
**whole**:

- the cursor is older than what is kept (Redis trimmed or forgot the run, and
  the archive pruned it, ``archive_retention_days``): ``CursorExpired``, naming
  the oldest seq still kept. Never a silent jump over the missing messages;
- the cursor names a seq the run never reached (beyond its end, or a cursor of
  another run): ``CursorBeyondEnd``, naming the run's last seq.

Each protocol turns these into its own explicit answer: a problem (410 / 400)
or an SSE ``event: error`` on REST, a JSON-RPC error with ``data`` on A2A and
MCP, a RUN_ERROR with a ``code`` on AG-UI.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from spindle.shared.bus.message_bus import MessageBus, StoredMessage
from spindle.shared.contracts.errors import SpindleError
from spindle.shared.store.archive import RunArchive

# The machine-readable codes every protocol reports (problem ``errors[].rule``,
# JSON-RPC ``data.reason``, AG-UI RUN_ERROR ``code``).
CURSOR_EXPIRED = "CURSOR_EXPIRED"
CURSOR_BEYOND_END = "CURSOR_BEYOND_END"
CURSOR_NOT_IN_RUN = "CURSOR_NOT_IN_RUN"


class CursorOutOfRange(SpindleError):
    """A resume cursor that cannot be served whole (see the subclasses).

    The problem body's ``errors[0]`` (and JSON-RPC ``data``, ``data()``) carries
    the code as ``rule`` / ``reason``, the ``cursor`` and the bound it broke.

    Args:
        stream_id: the run's stream.
        cursor: the seq the client resumes after.
        detail: what happened, for people.
        bound: the bound the cursor broke (``oldestSeq`` or ``lastSeq``).
    """

    status, jsonrpc_code, title = 400, -32602, "Cursor out of range"
    code: ClassVar[str] = CURSOR_BEYOND_END

    def __init__(self, stream_id: str, cursor: int, detail: str, bound: dict[str, Any]) -> None:
        self.stream_id = stream_id
        self.cursor = cursor
        self.bound = bound
        entry = {"field": "cursor", "rule": self.code, "message": detail, "cursor": cursor}
        super().__init__(detail, errors=[{**entry, **bound}])

    def data(self) -> dict[str, Any]:
        """What programs read: ``reason`` (the code), the cursor and the bound it broke."""
        return {"reason": self.code, "cursor": self.cursor, **self.bound}


class CursorExpired(CursorOutOfRange):
    """Messages right after the cursor are no longer kept (trimmed, expired or pruned).

    Attributes:
        oldest_seq: the oldest seq still kept after the cursor (None: none is).
    """

    status, title = 410, "Cursor expired"
    code = CURSOR_EXPIRED

    def __init__(self, stream_id: str, cursor: int, oldest_seq: int | None) -> None:
        kept = (
            f"the oldest message kept is seq {oldest_seq}"
            if oldest_seq is not None
            else "none of the messages after it is kept"
        )
        super().__init__(
            stream_id,
            cursor,
            f"cursor {cursor} of stream '{stream_id}' is older than what is kept: {kept} "
            "(archive_retention_days); read the run again from GET …/updates or start over",
            {"oldestSeq": oldest_seq},
        )
        self.oldest_seq = oldest_seq


class CursorBeyondEnd(CursorOutOfRange):
    """The cursor names a seq the run never reached (or one of another run).

    Attributes:
        last_seq: the run's last seq (0: it has none).
    """

    code = CURSOR_BEYOND_END

    def __init__(self, stream_id: str, cursor: int, last_seq: int) -> None:
        super().__init__(
            stream_id,
            cursor,
            f"cursor {cursor} is beyond the end of stream '{stream_id}' (its last seq is "
            f"{last_seq}): not a cursor of this run",
            {"lastSeq": last_seq},
        )
        self.last_seq = last_seq


def gap_after(cursor: int, read: Sequence[StoredMessage]) -> int | None:
    """The first seq of ``read`` when it does not follow ``cursor`` directly (else None)."""
    if read and read[0].seq > cursor + 1:
        return read[0].seq
    return None


async def reached(stream_id: str, seq: int, *, bus: MessageBus, archive: RunArchive | None) -> int:
    """The run's last seq if it is below ``seq``, else ``seq`` (the run reached it).

    Redis's counter first; when Redis forgot the run (the counter is 0 or below
    ``seq``), the archive: a message at ``seq`` or later there means it was reached.
    """
    last = await bus.last_seq(stream_id)
    if last >= seq or archive is None:
        return min(last, seq)
    try:
        stored = await archive.messages(stream_id, after_seq=seq - 1, limit=1)
    except Exception:  # the archive is down: what Redis says stands
        return last
    if stored:
        return seq
    # Only on the error path: the archive's last seq, for the error to name it.
    older = await archive.messages(stream_id, after_seq=max(0, last), limit=None)
    return max([last, *(m.seq for m in older)])


async def check_cursor(
    stream_id: str,
    cursor: int,
    read: Sequence[StoredMessage],
    *,
    bus: MessageBus,
    archive: RunArchive | None,
) -> None:
    """Raise unless ``read`` (what the store holds after ``cursor``) serves it whole.

    Raises:
        CursorExpired: the message right after the cursor is gone.
        CursorBeyondEnd: the run never reached the cursor.
    """
    first = gap_after(cursor, read)
    if first is not None:
        raise CursorExpired(stream_id, cursor, first)
    if read or cursor == 0:
        return
    last = await reached(stream_id, cursor, bus=bus, archive=archive)
    if last < cursor:
        raise CursorBeyondEnd(stream_id, cursor, last)
