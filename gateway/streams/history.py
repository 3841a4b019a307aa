"""A run's stored messages: Redis first, older ones from the Mongo archive.

Redis keeps the newest ``history_max_messages`` of a stream for
``history_ttl_days``; when a client asks for messages Redis no longer holds
(trimmed, or the stream expired), they come from the archive, in the same
stored bytes, so the caller serves one seq-ordered list either way.

``compact_superseded`` drops the STREAMING_CHUNK messages that a later message
of the same activity made void (seed 002: "streaming chunks are replaced by the
final message"), reading only the stored bytes.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import orjson

from spindle.shared.bus.message_bus import MessageBus, StoredMessage
from spindle.shared.contracts.messages import MAIN_WORKSTREAM, AgentMessageType
from spindle.shared.store.archive import RunArchive

log = logging.getLogger(__name__)


async def stored_messages(
    stream_id: str,
    *,
    bus: MessageBus,
    archive: RunArchive | None,
    after_seq: int = 0,
    since_ts: int | None = None,
) -> list[StoredMessage]:
    """Messages with ``seq > after_seq`` and ``ts > since_ts``, in seq order.

    Args:
        archive: None when the archive is disabled (Redis only).
    """
    recent = await bus.history(stream_id, after_seq=after_seq, since_ts=since_ts)
    if archive is None:
        return recent
    counter = recent[-1].seq if recent else await bus.last_seq(stream_id)
    upto: int | None = None  # archive seqs below this are needed (None: all)
    if counter:
        # LTRIM keeps the newest max_messages: seqs below first_kept are gone.
        first_kept = max(1, counter - bus.max_messages + 1)
        if first_kept <= after_seq + 1:
            return recent
        if since_ts is not None and (not recent or recent[0].seq > first_kept):
            # Redis still holds a message at or before ``since``: ts increases
            # with seq, so nothing older can be newer than ``since``.
            return recent
        upto = recent[0].seq if recent else first_kept
    try:
        older = await archive.messages(
            stream_id,
            after_seq=after_seq,
            limit=None if upto is None else max(0, upto - after_seq - 1),
        )
    except Exception as exc:
        log.warning("archive read of %s failed; serving what Redis holds: %s", stream_id, exc)
        return recent
    kept = [
        m for m in older if (upto is None or m.seq < upto) and (since_ts is None or m.ts > since_ts)
    ]
    return kept + recent


_CHUNK = int(AgentMessageType.STREAMING_CHUNK)
# Messages after which the chunks of the same activity are void: the final
# THOUGHT/ANSWER replaces them, RESTARTING announces a new attempt.
_SUPERSEDING = frozenset(
    int(t) for t in (AgentMessageType.THOUGHT, AgentMessageType.ANSWER, AgentMessageType.RESTARTING)
)
_TYPE_AT = len(b'"t":')


def stored_type(raw: bytes) -> int:
    """The ``t`` of a stored message, read from its ``{"ts":<n>,"t":<t>`` prefix."""
    start = raw.index(b",", 6) + 1 + _TYPE_AT
    end = start
    while end < len(raw) and 48 <= raw[end] <= 57:
        end += 1
    return int(raw[start:end])


def _activity(raw: bytes) -> tuple[str, str] | None:
    """(workstream, activity id) of a message, None without an activity id."""
    message = orjson.loads(raw)
    activity = message.get("i")
    if not isinstance(activity, str):
        return None
    return str(message.get("w") or MAIN_WORKSTREAM), activity


def compact_superseded(messages: list[StoredMessage]) -> list[StoredMessage]:
    """``messages`` without the STREAMING_CHUNKs made void by a later message.

    A chunk is dropped when a THOUGHT, ANSWER or RESTARTING with the same
    workstream and activity id (``w``, ``i``) follows it in ``messages``. The
    rest keep their order, seqs and bytes; chunks of a stream still under way
    stay. Only chunks and the messages that may supersede them are parsed.
    """
    superseded: set[tuple[str, str]] = set()
    kept: list[StoredMessage] = []
    dropped = False
    for message in reversed(messages):
        try:
            kind = stored_type(message.raw)
        except ValueError:
            kind = -1  # not the stored form: leave it alone
        if kind == _CHUNK:
            key = _activity(message.raw)
            if key is not None and key in superseded:
                dropped = True
                continue
        elif kind in _SUPERSEDING:
            key = _activity(message.raw)
            if key is not None:
                superseded.add(key)
        kept.append(message)
    if not dropped:
        return messages
    kept.reverse()
    return kept


class GzipCache:
    """Recently served gzip bodies of ``/updates``, keyed by what they hold.

    A stored message's bytes never change once its seq is assigned, so a body is
    fully named by its stream, its filters and the seqs it was built from (first,
    last, count): a run that has ended, or one many viewers open at once, is
    compressed once per process instead of once per request. Bounded by total
    compressed bytes, least recently used first out.

    Args:
        max_bytes: the most compressed bytes kept.
    """

    def __init__(self, max_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[tuple[object, ...], bytes] = OrderedDict()
        self._size = 0

    @staticmethod
    def key(stream_id: str, messages: list[StoredMessage], *filters: object) -> tuple[object, ...]:
        """What names a body built from ``messages`` (the selection, before compaction).

        The first and last ``ts`` (assigned by Redis, strictly increasing) tell
        apart a stream deleted and posted to again under the same id.
        """
        if not messages:
            return (stream_id, *filters)
        first, last = messages[0], messages[-1]
        return (stream_id, first.seq, first.ts, last.seq, last.ts, len(messages), *filters)

    def get(self, key: tuple[object, ...]) -> bytes | None:
        body = self._bodies.get(key)
        if body is not None:
            self._bodies.move_to_end(key)
        return body

    def put(self, key: tuple[object, ...], body: bytes) -> None:
        if len(body) > self.max_bytes or key in self._bodies:
            return
        self._bodies[key] = body
        self._size += len(body)
        while self._size > self.max_bytes:
            _, dropped = self._bodies.popitem(last=False)
            self._size -= len(dropped)
